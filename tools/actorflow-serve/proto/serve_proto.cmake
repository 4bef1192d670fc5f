# actorflow-serve's gRPC API, --model_config_file and TF Serving's warm-up file: the
# .proto copies under schemas/ compiled with protoc and grpc_cpp_plugin (Debian's
# libgrpc++-dev, libprotobuf-dev, protobuf-compiler, protobuf-compiler-grpc). Without them
# the server is built with REST only, and the gRPC tests skip. Included by the top-level
# CMakeLists.txt once the actorflow-serve target exists; sets AF_SERVE_GRPC.
set(AF_SERVE_GRPC OFF)
find_package(Protobuf QUIET)
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(AF_GRPCPP QUIET IMPORTED_TARGET grpc++)
endif()
find_program(AF_GRPC_CPP_PLUGIN grpc_cpp_plugin)
if(NOT (Protobuf_FOUND AND Protobuf_PROTOC_EXECUTABLE AND AF_GRPCPP_FOUND AND AF_GRPC_CPP_PLUGIN))
  message(STATUS "actorflow-serve: REST only (gRPC needs libgrpc++-dev, libprotobuf-dev, protobuf-compiler, protobuf-compiler-grpc)")
  return()
endif()

set(_af_schemas ${PROJECT_SOURCE_DIR}/schemas)
set(_af_proto_out ${CMAKE_BINARY_DIR}/generated/serving_proto)
set(_af_protos
    tensorflow/core/framework/types.proto
    tensorflow/core/framework/tensor_shape.proto
    tensorflow/core/framework/tensor.proto
    tensorflow/core/protobuf/meta_graph.proto
    tensorflow/core/protobuf/error_codes.proto
    tensorflow_serving/util/status.proto
    tensorflow_serving/apis/model.proto
    tensorflow_serving/apis/predict.proto
    tensorflow_serving/apis/get_model_metadata.proto
    tensorflow_serving/apis/get_model_status.proto
    tensorflow_serving/apis/prediction_log.proto
    tensorflow_serving/apis/prediction_service.proto
    tensorflow_serving/apis/model_service.proto
    tensorflow_serving/sources/storage_path/file_system_storage_path_source.proto
    tensorflow_serving/config/model_server_config.proto)
set(_af_services tensorflow_serving/apis/prediction_service.proto tensorflow_serving/apis/model_service.proto)
set(_af_proto_srcs)
set(_af_proto_deps)
foreach(p ${_af_protos})
  string(REGEX REPLACE "\\.proto$" "" base ${p})
  list(APPEND _af_proto_srcs ${_af_proto_out}/${base}.pb.cc)
  list(APPEND _af_proto_deps ${_af_schemas}/${p})
endforeach()
foreach(p ${_af_services})
  string(REGEX REPLACE "\\.proto$" "" base ${p})
  list(APPEND _af_proto_srcs ${_af_proto_out}/${base}.grpc.pb.cc)
endforeach()
file(MAKE_DIRECTORY ${_af_proto_out})
add_custom_command(
  OUTPUT ${_af_proto_srcs}
  COMMAND ${Protobuf_PROTOC_EXECUTABLE} -I ${_af_schemas} --cpp_out=${_af_proto_out} ${_af_protos}
  COMMAND ${Protobuf_PROTOC_EXECUTABLE} -I ${_af_schemas} --grpc_out=${_af_proto_out}
          --plugin=protoc-gen-grpc=${AF_GRPC_CPP_PLUGIN} ${_af_services}
  WORKING_DIRECTORY ${_af_schemas}
  DEPENDS ${_af_proto_deps}
  COMMENT "protoc: TF Serving's API for actorflow-serve"
  VERBATIM)
add_library(af_serving_proto STATIC ${_af_proto_srcs})
target_include_directories(af_serving_proto SYSTEM PUBLIC ${_af_proto_out})
target_link_libraries(af_serving_proto PUBLIC protobuf::libprotobuf PkgConfig::AF_GRPCPP)
# Generated code: not ours to warn about.
target_compile_options(af_serving_proto PRIVATE -w)

file(GLOB AF_SERVE_PROTO_SRCS CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.cpp)
target_sources(actorflow-serve PRIVATE ${AF_SERVE_PROTO_SRCS})
target_include_directories(actorflow-serve PRIVATE ${PROJECT_SOURCE_DIR}/tools/actorflow-serve)
target_link_libraries(actorflow-serve PRIVATE af_serving_proto)
target_compile_definitions(actorflow-serve PRIVATE AF_SERVE_GRPC=1)
set(AF_SERVE_GRPC ON)
