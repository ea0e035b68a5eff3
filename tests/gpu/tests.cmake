list(APPEND PIPELAB_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/gpu_executor_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gpu_graphs_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gpu_models_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gpu_offload_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gpu_new_models_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gpu_processes_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gpu_ragged_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gpu_training_test.cpp
)
