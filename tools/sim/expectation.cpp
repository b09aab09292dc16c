#include "expectation.h"

#include <charconv>
#include <sstream>
#include <vector>

namespace gpushare::sim {
namespace {

std::optional<double> number(const std::string& token) {
  double value = 0;
  const auto [end, status] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (status != std::errc() || end != token.data() + token.size()) return std::nullopt;
  return value;
}

}  // namespace

ExpectationResult check_expectation(const std::string& expression, const NtLookup& lookup) {
  std::istringstream words(expression);
  std::vector<std::string> tokens;
  for (std::string token; words >> token;) tokens.push_back(token);
  const auto malformed = [&](const std::string& why) {
    return ExpectationResult{false, "expectation '" + expression + "': " + why};
  };
  if (tokens.size() != 3 && tokens.size() != 5)
    return malformed("expected 'A OP B' or 'A OP B +|-|* NUMBER'");

  const auto value_of = [&](const std::string& token) -> std::optional<double> {
    if (auto literal = number(token)) return literal;
    return lookup(token);
  };
  const std::optional<double> left = value_of(tokens[0]);
  std::optional<double> right = value_of(tokens[2]);
  if (!left) return malformed("'" + tokens[0] + "' is neither a number nor a simulated policy/job");
  if (!right)
    return malformed("'" + tokens[2] + "' is neither a number nor a simulated policy/job");

  std::ostringstream filled;
  filled.precision(3);
  filled << std::fixed << *left << ' ' << tokens[1] << ' ' << *right;
  if (tokens.size() == 5) {
    const std::optional<double> operand = number(tokens[4]);
    if (!operand) return malformed("'" + tokens[4] + "' is not a number");
    if (tokens[3] == "+")
      *right += *operand;
    else if (tokens[3] == "-")
      *right -= *operand;
    else if (tokens[3] == "*")
      *right *= *operand;
    else
      return malformed("'" + tokens[3] + "' is not +, - or *");
    filled << ' ' << tokens[3] << ' ' << *operand;
  }

  bool holds = false;
  const std::string& op = tokens[1];
  if (op == ">")
    holds = *left > *right;
  else if (op == ">=")
    holds = *left >= *right;
  else if (op == "<")
    holds = *left < *right;
  else if (op == "<=")
    holds = *left <= *right;
  else
    return malformed("'" + op + "' is not >, >=, < or <=");
  return {holds, expression + "   [" + filled.str() + "]"};
}

}  // namespace gpushare::sim
