list(APPEND PIPELAB_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/batch_norm_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/compression_schemes_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/skip_connections_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/equivalence_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/modern_schedules_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/next_schedules_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/delayed_muon_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/paci_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pipedream_2bw_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pipedream_flush_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pipelined_backprop_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plan_equality_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sequence_segments_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/stage_recompute_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sync_schedules_test.cpp
)
list(APPEND PIPELAB_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/async_oracle_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ftpipe_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gap_aware_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/toy_pipeline.cpp
)
list(APPEND PIPELAB_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/async_runs_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/observers_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/nesterov_async_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pipemare_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/prediction_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/resume_state_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/basis_rotation_schemes_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/basis_rotation_pipeline_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shadow_sync_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/xpipe_test.cpp
)
list(APPEND PIPELAB_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/dp_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/replicas_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/replicated_stages_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gradient_sync_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/interlocking_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dgl_test.cpp
)
