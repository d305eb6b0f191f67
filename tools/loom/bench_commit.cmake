# Writes OUT (a header defining LOOM_BUILD_COMMIT) with `git rev-parse --short
# HEAD` of SRC, or "unknown" outside a git checkout. Run at every build and
# rewrites the file only when the commit changed, so loom bench records the
# commit the binary was built from without recompiling on every build.
execute_process(COMMAND git rev-parse --short HEAD WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit unknown)
endif()
file(CONFIGURE OUTPUT ${OUT} CONTENT "#define LOOM_BUILD_COMMIT \"${commit}\"\n")
