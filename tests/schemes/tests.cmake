list(APPEND PIPELAB_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/batch_norm_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/equivalence_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pipedream_flush_test.cpp
)
