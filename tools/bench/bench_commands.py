"""What the validation benchmarks (validate_time.py, validate_memory.py, validate_calibrate.py)
share: a pipelab command that must succeed, and their table written to a file."""
import subprocess
import sys


def run(cmd):
    """Runs `cmd`; its stdout, or the script stops with the command, its status and its output."""
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout


def write_table(path, lines):
    """Writes a markdown table's `lines` to `path` (nothing when `path` is empty)."""
    if path:
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
