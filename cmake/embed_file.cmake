# Turns a file into a C++ source that holds its bytes, so the binary carries
# it (the web chat page): -DIN=file -DOUT=source.cpp -DNAME=symbol -DNAMESPACE=ns
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" hex_length)
math(EXPR size "${hex_length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
string(REGEX REPLACE "(('[^']+',){24})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}" "// Generated from ${IN} by cmake/embed_file.cmake.
#include <cstddef>
#include <string_view>
namespace ${NAMESPACE} {
static const char ${NAME}_bytes[] = {
${bytes}
};
extern const std::string_view ${NAME}(${NAME}_bytes, ${size});
}  // namespace ${NAMESPACE}
")
