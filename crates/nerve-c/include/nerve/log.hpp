// Nerve C++ API: logging. A node's records go to stderr and to /rosout (read by
// `nerve log echo` and Foxglove's Log panel), stamped by the context's clock (simulation
// time when it is on); the threshold comes from NERVE_LOG_LEVEL (default info) or
// set_level(). The macros format only records that will be written:
//
//   NERVE_INFO(node, "speed " << v << " m/s");
//   nerve::log::warn(node, "battery low");
#pragma once

#include <nerve.hpp>

#include <sstream>
#include <string_view>

namespace nerve::log {

/// Log levels (ROS 2's numbers).
enum class Level : int {
  debug = NERVE_LOG_DEBUG,
  info = NERVE_LOG_INFO,
  warn = NERVE_LOG_WARN,
  error = NERVE_LOG_ERROR,
  fatal = NERVE_LOG_FATAL,
};

/// Writes `message` at `level` from `node` (nothing below the node's threshold).
/// `file`, `function` and `line` say where it was written (the macros fill them in).
inline void write(const Node& node, Level level, std::string_view message,
                  const char* file = nullptr, const char* function = nullptr,
                  unsigned line = 0) {
  detail::check(nerve_node_log(node.handle(), static_cast<int>(level),
                               detail::c_string(message).c_str(), file, function, line));
}

/// Sets the node's threshold: records below `level` are not written.
inline void set_level(const Node& node, Level level) {
  detail::check(nerve_node_set_log_level(node.handle(), static_cast<int>(level)));
}

/// Whether a record of `level` from `node` would be written.
inline bool enabled(const Node& node, Level level) {
  bool on = false;
  detail::check(nerve_node_log_enabled(node.handle(), static_cast<int>(level), &on));
  return on;
}

/// Writes at debug level.
inline void debug(const Node& node, std::string_view message) {
  write(node, Level::debug, message);
}
/// Writes at info level.
inline void info(const Node& node, std::string_view message) {
  write(node, Level::info, message);
}
/// Writes at warn level.
inline void warn(const Node& node, std::string_view message) {
  write(node, Level::warn, message);
}
/// Writes at error level.
inline void error(const Node& node, std::string_view message) {
  write(node, Level::error, message);
}
/// Writes at fatal level.
inline void fatal(const Node& node, std::string_view message) {
  write(node, Level::fatal, message);
}

}  // namespace nerve::log

/// Writes the stream expression `expr` at `level` (a nerve::log::Level) from `node`, with
/// this file, function and line; the expression is evaluated only when the record will be
/// written.
#define NERVE_LOG(node, level, expr)                                                   \
  do {                                                                                 \
    if (::nerve::log::enabled((node), (level))) {                                      \
      std::ostringstream nerve_log_stream_;                                            \
      nerve_log_stream_ << expr;                                                       \
      ::nerve::log::write((node), (level), nerve_log_stream_.str(), __FILE__, __func__, \
                          static_cast<unsigned>(__LINE__));                            \
    }                                                                                  \
  } while (0)
/// NERVE_LOG at debug level.
#define NERVE_DEBUG(node, expr) NERVE_LOG(node, ::nerve::log::Level::debug, expr)
/// NERVE_LOG at info level.
#define NERVE_INFO(node, expr) NERVE_LOG(node, ::nerve::log::Level::info, expr)
/// NERVE_LOG at warn level.
#define NERVE_WARN(node, expr) NERVE_LOG(node, ::nerve::log::Level::warn, expr)
/// NERVE_LOG at error level.
#define NERVE_ERROR(node, expr) NERVE_LOG(node, ::nerve::log::Level::error, expr)
/// NERVE_LOG at fatal level.
#define NERVE_FATAL(node, expr) NERVE_LOG(node, ::nerve::log::Level::fatal, expr)
