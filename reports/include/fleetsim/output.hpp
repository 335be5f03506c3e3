// Where fleetsim's outputs go, written so that nothing is lost: the one way every command writes a
// file or a directory of files.
//
// A regular file (or a missing one) is written beside its place and renamed over it once whole, so a
// failed write leaves the old file as it was and never half a new one. Anything else that is there is
// not replaced: a character device or a named pipe (`--report /dev/null`, `--out /dev/stdout`, a FIFO)
// is written through, as the shell's `>` would; a directory, a block device, a socket or a symbolic
// link that leads nowhere is refused with the reason. A symbolic link to a regular file keeps being a
// link: the file it names is replaced. An output directory is all or nothing: its files are written
// into a fresh directory beside it and moved in only once every one is whole and every name they take
// is known to be free or a regular file.
#pragma once

#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace fleetsim {

// One file of an output directory: its name there, what it holds (for messages), how to write it.
struct OutputFile {
  std::string name;
  std::string what;
  std::function<void(std::ostream&)> write;
};

// Throws, naming `option`, the path and the reason, where `path` could not take an output file: run
// before the work that makes the output, so a long measurement does not end in a path that was never
// writable.
void check_output_file(const std::filesystem::path& path, const std::string& option);
// The same for a directory that is to receive the files `names`.
void check_output_directory(const std::filesystem::path& dir, const std::vector<std::string>& names, const std::string& option);

// Writes a file through `write` as the header says; an error naming `what`, the path and the reason
// where it cannot be written.
void write_output_file(const std::filesystem::path& path, const std::string& what, const std::function<void(std::ostream&)>& write);
// Writes every file into `dir` (made if missing), all or nothing; the files are written side by side on
// a few threads, so each writer must only read what it writes. Returns the names written, in order.
std::vector<std::string> write_output_directory(const std::filesystem::path& dir, const std::vector<OutputFile>& files);

}  // namespace fleetsim
