// The one writer of fleetsim's outputs (see output.hpp for what it promises).
#include "fleetsim/output.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <stdexcept>
#include <thread>

#include <unistd.h>

#include "fleetsim/error.hpp"

namespace fleetsim {
namespace {

namespace fs = std::filesystem;

// What is at an output path, and so how it is written.
struct Destination {
  enum class Way { create, replace, write_through, refused } way = Way::refused;
  fs::path path;       // where the bytes go: a link's target for a link
  std::string reason;  // why it is refused
};

bool writable(const fs::path& p) { return ::access(p.c_str(), W_OK) == 0; }

// The nearest directory that exists above a path still to be made, or a reason none can be made there.
std::string creatable(const fs::path& path) {
  fs::path above = path.parent_path();
  if (above.empty()) above = ".";
  std::error_code ec;
  while (!fs::exists(fs::symlink_status(above, ec)) && above.has_relative_path() && above != above.parent_path()) above = above.parent_path();
  if (above.empty()) above = ".";
  if (!fs::is_directory(above, ec)) return above.string() + " is not a directory";
  if (!writable(above)) return "the directory " + above.string() + " is not writable";
  return "";
}

Destination destination(const fs::path& path) {
  std::error_code ec;
  const fs::file_status link = fs::symlink_status(path, ec);
  if (!fs::exists(link)) {
    const std::string why = creatable(path);
    return why.empty() ? Destination{Destination::Way::create, path, ""} : Destination{Destination::Way::refused, path, why};
  }
  const fs::file_status what = fs::status(path, ec);
  if (fs::is_symlink(link) && !fs::exists(what)) {
    return {Destination::Way::refused, path, "is a symbolic link to " + fs::read_symlink(path, ec).string() + ", which does not exist"};
  }
  if (fs::is_regular_file(what)) {
    const fs::path real = fs::canonical(path, ec);
    if (ec) return {Destination::Way::refused, path, ec.message()};
    if (!writable(real.parent_path())) return {Destination::Way::refused, path, "its directory " + real.parent_path().string() + " is not writable"};
    return {Destination::Way::replace, real, ""};
  }
  if (fs::is_character_file(what) || fs::is_fifo(what)) {
    if (!writable(path)) return {Destination::Way::refused, path, "is not writable"};
    return {Destination::Way::write_through, path, ""};
  }
  if (fs::is_directory(what)) return {Destination::Way::refused, path, "is a directory (expected the name of a file)"};
  if (fs::is_block_file(what)) return {Destination::Way::refused, path, "is a block device; fleetsim writes to files, character devices and pipes only"};
  return {Destination::Way::refused, path, "is a socket or another special file; fleetsim writes to files, character devices and pipes only"};
}

// The files of an existing output directory that a run would replace must be plain files: the run
// never replaces a directory, a link or a device that happens to bear one of its names.
std::string occupied(const fs::path& dir, const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    std::error_code ec;
    const fs::file_status s = fs::symlink_status(dir / name, ec);
    if (fs::exists(s) && !fs::is_regular_file(s)) {
      return (dir / name).string() + (fs::is_directory(s) ? " is a directory" : fs::is_symlink(s) ? " is a symbolic link" : " is not a regular file") +
             "; an output directory's files replace only regular files of their names";
    }
  }
  return "";
}

// Why `dir` could not receive `names`, or "".
std::string directory_problem(const fs::path& dir, const std::vector<std::string>& names) {
  std::error_code ec;
  if (!fs::exists(fs::status(dir, ec))) {
    if (fs::is_symlink(fs::symlink_status(dir, ec))) return dir.string() + " is a symbolic link to a directory that does not exist";
    const std::string why = creatable(dir / "x");
    return why.empty() ? "" : "cannot make " + dir.string() + ": " + why;
  }
  if (!fs::is_directory(fs::status(dir, ec))) return dir.string() + " exists and is not a directory";
  if (!writable(dir)) return "the directory " + dir.string() + " is not writable";
  return occupied(dir, names);
}

fs::path normal(const fs::path& dir) {
  fs::path p = dir.lexically_normal();
  if (!p.has_filename() && p.has_parent_path() && p != p.root_path()) p = p.parent_path();
  return p;
}

void write_stream(const fs::path& into, const fs::path& named, const std::string& what, const std::function<void(std::ostream&)>& write) {
  std::ofstream out(into, std::ios::binary);
  if (!out) throw std::runtime_error("cannot write " + what + " to " + named.string() + ": " + std::strerror(errno));
  write(out);
  out.flush();
  if (!out) throw std::runtime_error("error while writing " + what + " to " + named.string() + ": " + std::strerror(errno));
  out.close();
  if (!out) throw std::runtime_error("error while writing " + what + " to " + named.string() + ": " + std::strerror(errno));
}

}  // namespace

void check_output_file(const fs::path& path, const std::string& option) {
  const Destination d = destination(path);
  if (d.way == Destination::Way::refused) throw InputError({Problem{option, "", "cannot write to " + path.string() + ": " + d.reason}});
}

void check_output_directory(const fs::path& dir, const std::vector<std::string>& names, const std::string& option) {
  const std::string why = directory_problem(normal(dir), names);
  if (!why.empty()) throw InputError({Problem{option, "", why}});
}

void write_output_file(const fs::path& path, const std::string& what, const std::function<void(std::ostream&)>& write) {
  const Destination d = destination(path);
  switch (d.way) {
    case Destination::Way::refused: throw std::runtime_error("cannot write " + what + " to " + path.string() + ": " + d.reason);
    case Destination::Way::write_through: write_stream(d.path, path, what, write); return;
    case Destination::Way::create:
    case Destination::Way::replace: break;
  }
  if (d.path.has_parent_path()) fs::create_directories(d.path.parent_path());
  // Written beside its place and renamed into it once whole: a failed write leaves no half file (and
  // an older file of that name as it was).
  struct Partial {
    fs::path path;
    bool kept = false;
    ~Partial() {
      std::error_code ignored;
      if (!kept) fs::remove(path, ignored);
    }
  } partial{d.path.string() + ".partial-" + std::to_string(::getpid())};
  write_stream(partial.path, path, what, write);
  if (d.way == Destination::Way::replace) {
    std::error_code ignored;  // the old file's permissions, where they can be read
    fs::permissions(partial.path, fs::status(d.path, ignored).permissions(), ignored);
  }
  fs::rename(partial.path, d.path);
  partial.kept = true;
}

std::vector<std::string> write_output_directory(const fs::path& dir, const std::vector<OutputFile>& files) {
  std::vector<std::string> names;
  for (const OutputFile& f : files) names.push_back(f.name);
  const fs::path target = normal(dir);
  if (const std::string why = directory_problem(target, names); !why.empty()) throw std::runtime_error("nothing was written to " + target.string() + ": " + why);
  // The files are assembled in a fresh directory: beside the target where it is still to be made (and
  // then renamed into its place whole), inside it where it exists (so the moves stay on its file system).
  std::error_code ec;
  const bool exists = fs::exists(fs::status(target, ec));
  const fs::path real = exists ? fs::canonical(target) : target;
  const std::string tag = ".partial-" + std::to_string(::getpid());
  fs::path staging;
  if (exists) {
    staging = real / (".fleetsim" + tag);
  } else {
    const fs::path parent = real.has_parent_path() ? real.parent_path() : fs::path(".");
    fs::create_directories(parent);
    staging = parent / ("." + real.filename().string() + tag);
  }
  fs::remove_all(staging);
  fs::create_directory(staging);
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  } cleanup{staging};
  // The writers only read: the files are written side by side, one per hardware thread. Each file's
  // bytes do not depend on which thread wrote it.
  std::atomic<std::size_t> next{0};
  std::vector<std::exception_ptr> errors(files.size());
  const auto work = [&] {
    for (std::size_t f; (f = next++) < files.size();) {
      try {
        write_output_file(staging / files[f].name, files[f].what, files[f].write);
      } catch (...) {
        errors[f] = std::current_exception();
      }
    }
  };
  {
    std::vector<std::jthread> helpers(std::clamp<std::size_t>(std::min<std::size_t>(std::thread::hardware_concurrency(), files.size()), 1, 4) - 1);
    for (std::jthread& h : helpers) h = std::jthread(work);
    work();
  }
  for (const std::exception_ptr& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      throw std::runtime_error("nothing was written to " + target.string() + ": " + x.what());
    }
  }
  // A new directory takes its place whole; into an existing one each file is moved over its old self,
  // after the check above found every name free or a regular file.
  if (!exists) {
    fs::rename(staging, real);
  } else {
    if (const std::string why = occupied(real, names); !why.empty()) throw std::runtime_error("nothing was written to " + target.string() + ": " + why);
    for (const std::string& name : names) fs::rename(staging / name, real / name);
  }
  return names;
}

}  // namespace fleetsim
