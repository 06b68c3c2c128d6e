# Installs the built library into a scratch prefix, then configures, builds and runs a
# consumer project that uses find_package(flashmsa) and flashmsa::flashmsa.
set(prefix ${BINARY_DIR}/install_test/prefix)
set(consumer_build ${BINARY_DIR}/install_test/consumer)
file(REMOVE_RECURSE ${BINARY_DIR}/install_test)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BINARY_DIR} --prefix ${prefix}
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install_consumer -B ${consumer_build}
                        -DCMAKE_PREFIX_PATH=${prefix} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the find_package consumer failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${consumer_build} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the find_package consumer failed: ${rc}")
endif()
execute_process(COMMAND ${consumer_build}/consumer RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "the find_package consumer failed: ${rc}")
endif()
