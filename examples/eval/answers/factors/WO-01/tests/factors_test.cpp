#include <cstdint>
#include <iostream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "../src/factors.hpp"

using Factors = std::vector<std::pair<std::uint64_t, int>>;

int main() {
  int failures = 0;
  const std::vector<std::pair<std::uint64_t, Factors>> cases = {
      {12, {{2, 2}, {3, 1}}},
      {97, {{97, 1}}},
      {360, {{2, 3}, {3, 2}, {5, 1}}},
  };
  for (const auto& [n, want] : cases) {
    if (factorize(n) != want) {
      std::cerr << "factorize(" << n << ") is wrong\n";
      ++failures;
    }
  }
  try {
    factorize(1);
    std::cerr << "factorize(1) did not throw\n";
    ++failures;
  } catch (const std::invalid_argument&) {
  }
  return failures == 0 ? 0 : 1;
}
