# Writes the web page IN as a C++ source OUT defining loom::serve::web_page(),
# the page's bytes as a string_view (as hex escapes: any byte is safe).
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "\\\\x\\1" escaped "${hex}")
# 32 bytes a line.
string(REPEAT "\\\\x[0-9a-f][0-9a-f]" 32 line)
string(REGEX REPLACE "(${line})" "\\1\"\n\"" lines "${escaped}")
file(WRITE ${OUT}.tmp "// Generated from ${IN} by embed.cmake; do not edit.\n#include <string_view>\nnamespace loom::serve {\nstd::string_view web_page() {\n  static const char page[] =\n\"${lines}\";\n  return {page, ${bytes}};\n}\n}  // namespace loom::serve\n")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
