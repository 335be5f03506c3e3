# cmake -DINPUT=file -DOUTPUT=file.cpp -DSYMBOL=name -P EmbedText.cmake
# Writes a translation unit defining `std::string_view fleetsim::embedded::SYMBOL()` holding the file's text,
# so the fleetsim binary carries its catalog and works from any directory.
file(READ "${INPUT}" _text)
set(_delim "FLEETSIM_EMBED")
string(FIND "${_text}" ")${_delim}\"" _clash)
if(NOT _clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter ${_delim}")
endif()
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT_NAME} at build time; do not edit.\n"
  "#include <string_view>\n"
  "namespace fleetsim::embedded {\n"
  "std::string_view ${SYMBOL}() {\n"
  "  static constexpr char text[] = R\"${_delim}(${_text})${_delim}\";\n"
  "  return {text, sizeof(text) - 1};\n"
  "}\n"
  "}  // namespace fleetsim::embedded\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
