# Splits README.md into the files the README tests use, in the folder `out`:
#   readme_<n>.cpp        every ```cpp block, numbered from 1 (each one a whole program
#                         or translation unit)
#   readme_1.expected     the first ```text block after the first program: its output
#   consumer.cmake        the first ```cmake block: the outside project's CMakeLists.txt
#   pkg_config_command    the first line of a ```sh block that runs `pkg-config`
# usage: awk -v out=DIR -f extract.awk README.md
/^```/ {
  if (mode != "") {
    if (mode == "write") close(file)
    mode = ""
    next
  }
  lang = substr($0, 4)
  mode = "skip"
  if (lang == "cpp") {
    n++
    file = out "/readme_" n ".cpp"
    mode = "write"
  } else if (lang == "text" && n == 1 && !have_output) {
    file = out "/readme_1.expected"
    have_output = 1
    mode = "write"
  } else if (lang == "cmake" && !have_cmake) {
    file = out "/consumer.cmake"
    have_cmake = 1
    mode = "write"
  } else if (lang == "sh") {
    mode = "sh"
  }
  if (mode == "write") printf "" > file
  next
}
mode == "write" { print > file }
mode == "sh" && /pkg-config/ && !have_pc {
  print > (out "/pkg_config_command")
  close(out "/pkg_config_command")
  have_pc = 1
}
