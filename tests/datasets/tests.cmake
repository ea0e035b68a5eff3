list(APPEND PIPELAB_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/bpe_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/formats_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/image_files_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/loader_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shared_data_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/synthetic_tokens_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/text_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/transforms_test.cpp
)
