# Every dependency comes from a Debian package installed by scripts/setup-deps.
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(cppzmq REQUIRED)              # cppzmq-dev (brings libzmq)
find_package(msgpack REQUIRED)             # libmsgpack-cxx-dev: target msgpackc-cxx
find_package(yaml-cpp REQUIRED)            # libyaml-cpp-dev: target yaml-cpp
find_package(CLI11 REQUIRED)               # libcli11-dev: target CLI11::CLI11
find_package(nlohmann_json REQUIRED)       # nlohmann-json3-dev: target nlohmann_json::nlohmann_json
pkg_check_modules(SODIUM REQUIRED IMPORTED_TARGET libsodium)   # libsodium-dev
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib) # libcpp-httplib-dev: the monitor's dashboard
# libjs-chart.js: the dashboard's charts, built into dedloc-avg (no CDN at run time).
find_file(DEDLOC_CHART_JS chart.min.js PATHS /usr/share/javascript/chart.js NO_DEFAULT_PATH REQUIRED)

# lpsolve ships no CMake config, only static archives (liblpsolve55-dev).
find_path(LPSOLVE_INCLUDE_DIR lp_lib.h PATH_SUFFIXES lpsolve REQUIRED)
find_library(LPSOLVE_LIBRARY NAMES lpsolve55_pic lpsolve55 PATH_SUFFIXES lp_solve REQUIRED)
find_library(COLAMD_LIBRARY colamd REQUIRED)
add_library(dedloc_lpsolve INTERFACE)
target_include_directories(dedloc_lpsolve SYSTEM INTERFACE ${LPSOLVE_INCLUDE_DIR})
target_link_libraries(dedloc_lpsolve INTERFACE ${LPSOLVE_LIBRARY} ${COLAMD_LIBRARY} ${CMAKE_DL_LIBS} m)

if(DEDLOC_TESTS)
  find_package(Catch2 REQUIRED)            # catch2 (v2): Catch2::Catch2WithMain
  include(Catch)
endif()

if(DEDLOC_TORCH)
  # Only targets that train link libtorch: it costs ~0.7 s and ~160 MB before main().
  find_package(Torch REQUIRED)
  find_package(ZLIB REQUIRED)              # zlib1g-dev: ZLIB::ZLIB, the gzip'd IDX files of Fashion-MNIST
  pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)  # libsentencepiece-dev: dedloc-tokenize
endif()

# Header-only users of msgpack must not pull in Boost.
add_compile_definitions(MSGPACK_NO_BOOST)
