list(APPEND PIPELAB_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/cli_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/compression_run_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/describe_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/docs_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/experiments_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/hardening_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/hardening_surfaces_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/json_files_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/launch_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/readme_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/simulate_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/svg_plot_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sweep_plan_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sweep_run_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/table_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/torchrun_test.cpp
)
