// A few lines of command-line parsing shared by the examples: `--name value` options and
// `--flag` switches, with defaults. Not part of Nerve.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace example {

class Args {
 public:
  Args(int argc, char** argv) : argc_(argc), argv_(argv) {}

  /// The value after `--name`, or `def`.
  std::string str(std::string_view name, std::string def) const {
    for (int i = 1; i + 1 < argc_; ++i)
      if (argv_[i] == "--" + std::string(name)) return argv_[i + 1];
    return def;
  }
  /// The number after `--name`, or `def`.
  double num(std::string_view name, double def) const {
    const std::string s = str(name, "");
    if (s.empty()) return def;
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || *end != '\0') {
      std::fprintf(stderr, "--%s wants a number, not %s\n", std::string(name).c_str(), s.c_str());
      std::exit(2);
    }
    return v;
  }
  /// The integer after `--name`, or `def`.
  long long integer(std::string_view name, long long def) const {
    const std::string s = str(name, "");
    if (s.empty()) return def;
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (end == s.c_str() || *end != '\0') {
      std::fprintf(stderr, "--%s wants an integer, not %s\n", std::string(name).c_str(), s.c_str());
      std::exit(2);
    }
    return v;
  }
  /// Whether `--name` is there.
  bool flag(std::string_view name) const {
    for (int i = 1; i < argc_; ++i)
      if (argv_[i] == "--" + std::string(name)) return true;
    return false;
  }

 private:
  int argc_;
  char** argv_;
};

}  // namespace example
