# find_package(pipelab): what a plugin out of tree builds with (docs/adding-a-scheme.md, "A
# plugin in its own repository"): pipelab's headers, the LibTorch they were built against
# (the one in Python's torch wheel, found as pipelab's own build finds it), yaml-cpp and fmt.
#
#   find_package(pipelab REQUIRED)
#   pipelab_add_plugin(my_scheme my_scheme.cpp)   # -> libmy_scheme.so
#
# A plugin is a MODULE library that links nothing of pipelab's: `pipelab --plugin FILE` (or an
# experiment's `plugins:`) loads it into the pipelab command, which provides every symbol, and
# its PIPELAB_REGISTER lines add its components to the registries.
include(CMakeFindDependencyMacro)
get_filename_component(_pipelab_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET pipelab::torch)
  include("${CMAKE_CURRENT_LIST_DIR}/torch.cmake")
endif()
find_dependency(yaml-cpp)
find_dependency(fmt)
find_dependency(nlohmann_json 3)
if(NOT TARGET pipelab::core)
  add_library(pipelab::core INTERFACE IMPORTED)
  set_target_properties(pipelab::core PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_pipelab_prefix}/include/pipelab"
    INTERFACE_LINK_LIBRARIES "pipelab::torch;yaml-cpp;fmt::fmt-header-only"
    INTERFACE_COMPILE_FEATURES cxx_std_17)
endif()

# A shared library of plugins built from SOURCES, named lib<name>.so.
function(pipelab_add_plugin name)
  add_library(${name} MODULE ${ARGN})
  target_link_libraries(${name} PRIVATE pipelab::core)
  set_target_properties(${name} PROPERTIES PREFIX "lib" CXX_VISIBILITY_PRESET default)
endfunction()
