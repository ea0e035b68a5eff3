#!/usr/bin/env python3
"""torch's side of tests/tools/torch_csv_test.cpp: torch.distributed.pipelining's own schedule
generators and CSV reader, run on stand-in stage objects (the generators read only a stage's
index, count and group; nothing here trains or opens a process group).

    torch_csv_check.py generate DIR   # torch's orders as CSV files, compute_only and compute_comms
    torch_csv_check.py reload FILE P  # FILE through torch's _load_csv, written back as FILE.back
"""
import csv
import os
import sys

import torch
from torch.distributed.pipelining import schedules as S


class Stand:
    """What the schedule classes read of a stage."""

    def __init__(self, index, stages, rank, ranks):
        self.stage_index, self.num_stages = index, stages
        self.group_rank, self.group_size = rank, ranks
        self.submod = torch.nn.Identity()
        self.has_backward = True
        self.is_first, self.is_last = index == 0, index == stages - 1


def looped(ranks, local, rank):
    return [Stand(rank + ranks * k, ranks * local, rank, ranks) for k in range(local)]


def v_shaped(ranks, rank):
    return [Stand(rank, 2 * ranks, rank, ranks), Stand(2 * ranks - 1 - rank, 2 * ranks, rank, ranks)]


def write(path, rows):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        for row in rows:
            writer.writerow(row)


def generate(folder):
    cases = []
    for p, l, n in [(2, 2, 2), (2, 2, 4), (3, 2, 5), (4, 2, 3), (4, 2, 4), (4, 2, 8), (4, 2, 10), (4, 3, 6), (3, 3, 6), (3, 2, 2)]:
        cases.append((f"izb_{p}_{l}_{n}", S.ScheduleInterleavedZeroBubble, p, l, n, False))
    for p, l, n in [(2, 2, 2), (2, 2, 4), (4, 2, 4), (4, 2, 3), (4, 2, 6), (4, 2, 10), (4, 3, 8), (3, 2, 6)]:
        cases.append((f"i1f1b_{p}_{l}_{n}", S.ScheduleInterleaved1F1B, p, l, n, False))
    cases.append(("zbv_2_2_4", S.ScheduleZBVZeroBubble, 2, 2, 4, True))
    for name, cls, p, l, n, v in cases:
        order = {}
        for rank in range(p):
            order[rank] = cls(v_shaped(p, rank) if v else looped(p, l, rank), n).pipeline_order[rank]
        write(os.path.join(folder, name + ".csv"), [order[r] for r in range(p)])
        # The compute_comms form torch's runtime lowers it to (UNSHARD, SEND/RECV, WAIT_SEND,
        # REDUCE_GRAD, RESHARD ...), what its _dump_csv(format="compute_comms") writes.
        runtime = S._PipelineScheduleRuntime(v_shaped(p, 0) if v else looped(p, l, 0), n)
        runtime._load_csv(os.path.join(folder, name + ".csv"), format="compute_only")
        runtime._dump_csv(os.path.join(folder, name + ".comms.csv"), format="compute_comms")


def reload(path, ranks):
    with open(path, newline="") as f:
        rows = [row for row in csv.reader(f)]
    actions = [S._Action.from_str(cell) for row in rows for cell in row if cell]
    stages = max(a.stage_index for a in actions) + 1
    micro = max(a.microbatch_index for a in actions) + 1
    schedule = S.ScheduleLoopedBFS(looped(ranks, stages // ranks, 0), micro)
    schedule._load_csv(path)
    write(path + ".back", [[a for a in schedule.pipeline_order[r] if a is not None] for r in range(ranks)])


if __name__ == "__main__":
    if sys.argv[1] == "generate":
        generate(sys.argv[2])
    else:
        reload(sys.argv[2], int(sys.argv[3]))
    print("ok")
