# Runs PROGRAM and compares what it prints with the README's block EXPECTED, line by line
# (trailing spaces aside). usage: cmake -DPROGRAM=... -DEXPECTED=... -P check_output.cmake
execute_process(COMMAND ${PROGRAM} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} exited with ${rc}:\n${out}${err}")
endif()
file(READ ${EXPECTED} expected)
string(REGEX REPLACE "[ \t]+\n" "\n" out "${out}")
string(REGEX REPLACE "[ \t]+\n" "\n" expected "${expected}")
if(NOT out STREQUAL expected)
  message(FATAL_ERROR "the README's first program printed\n${out}\nbut the README shows\n${expected}")
endif()
message(STATUS "output matches the README:\n${out}")
