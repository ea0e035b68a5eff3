list(APPEND PIPELAB_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/block_io_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/data_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/input_files_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/memory_meter_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/optimizer_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/partition_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/precision_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pt_file_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pt_reader_hardening_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/registry_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/reproducibility_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/schedule_ir_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/schedule_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/schedule_validate_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/stage_test.cpp
)
