// Helpers shared by the GoogleTest files of the C++ API: every test process gets its own
// domain and a temporary state directory (removed at exit), and unique topic, service
// and node names, so tests never see each other (nor other processes).
#pragma once

#include <nerve.hpp>

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace nerve_test {

/// This process's temporary state directory (created once).
inline const std::string& state_dir() {
  static const std::string dir = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "nerve-cpp-test-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    return tmpl;
  }();
  return dir;
}

/// Removes the state directory when the test program ends.
class StateDirCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(state_dir(), ec);
  }
};

/// Registered once per program (an inline variable), before main.
inline ::testing::Environment* const cleanup_env =
    ::testing::AddGlobalTestEnvironment(new StateDirCleanup);

/// Context options of this test process: its own domain and state directory, no network.
inline nerve::ContextOptions options() {
  nerve::ContextOptions o;
  o.domain = 1 + static_cast<std::uint32_t>(::getpid()) % 999;
  o.state_dir = state_dir();
  o.network = false;
  return o;
}

/// A name unique to this process and call: "/<prefix>_<pid>_<n>" (topics, services).
inline std::string unique(const std::string& prefix) {
  static std::atomic<int> n{0};
  return "/" + prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(++n);
}

/// A node name unique to this process ("<prefix>_<n>").
inline std::string node_name(const std::string& prefix) {
  static std::atomic<int> n{0};
  return prefix + "_" + std::to_string(++n);
}

/// Whether `text` contains `part`.
inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

using namespace std::chrono_literals;

}  // namespace nerve_test
