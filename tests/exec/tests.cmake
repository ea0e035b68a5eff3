list(APPEND PIPELAB_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/device_channels_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/distributed_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/executor_equivalence_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/executor_failure_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/launch_env_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/offload_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shm_link_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/stage_costs_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/trace_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/world_test.cpp
)
