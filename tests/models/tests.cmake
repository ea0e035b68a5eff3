list(APPEND PIPELAB_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/amoebanet_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/blocks_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/unet_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/densenet_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/googlenet_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/inception_v3_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/language_model_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/mobilenet_v2_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/resnet_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/roberta_model_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sequential_model_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/text_models_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/torchscript_model_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/torchvision_names_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/training_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/vgg_test.cpp
)
