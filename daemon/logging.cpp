#include "logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace gpushare::daemon {
namespace {

// %* -> "<N>", the sd-daemon(3) priority prefix for the line's level.
class SyslogPriority : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const char* prefix = "<6>";
    switch (msg.level) {
      case spdlog::level::trace:
      case spdlog::level::debug:
        prefix = "<7>";
        break;
      case spdlog::level::info:
        prefix = "<6>";
        break;
      case spdlog::level::warn:
        prefix = "<4>";
        break;
      case spdlog::level::err:
        prefix = "<3>";
        break;
      case spdlog::level::critical:
        prefix = "<2>";
        break;
      default:
        break;
    }
    dest.append(prefix, prefix + 3);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<SyslogPriority>();
  }
};

}  // namespace

void setup_logging(const std::string& level) {
  auto logger = std::make_shared<spdlog::logger>("gpushared",
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  if (std::getenv("JOURNAL_STREAM"))
    formatter->add_flag<SyslogPriority>('*').set_pattern("%*%v");
  else
    formatter->set_pattern("%Y-%m-%d %H:%M:%S.%e gpushared %l: %v");
  logger->set_formatter(std::move(formatter));
  logger->flush_on(spdlog::level::trace);  // one event, one line, written now
  spdlog::set_default_logger(logger);
  set_log_level(level);
}

std::string log_text(std::string_view text) {
  auto plain = [](unsigned char ch) {
    return ch > 0x20 && ch < 0x7f && ch != '"' && ch != '\\' && ch != '=';
  };
  bool quote = text.empty();
  for (unsigned char ch : text) quote |= !plain(ch);
  if (!quote) return std::string(text);
  std::string out = "\"";
  for (unsigned char ch : text) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch < 0x20 || ch >= 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", ch);
      out += hex;
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out + "\"";
}

void set_log_level(const std::string& level) {
  spdlog::set_level(spdlog::level::from_str(level));
}

}  // namespace gpushare::daemon
