#include <cstdint>
#include <iostream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "../src/factors.hpp"

using Factors = std::vector<std::pair<std::uint64_t, int>>;

static int failures = 0;

static void expect(std::uint64_t n, const Factors& want) {
  Factors got = factorize(n);
  if (got != want) {
    std::cerr << "factorize(" << n << ") is wrong:";
    for (const auto& [p, e] : got) std::cerr << " (" << p << ", " << e << ")";
    std::cerr << "\n";
    ++failures;
  }
}

int main() {
  expect(2, {{2, 1}});
  expect(1024, {{2, 10}});
  expect(600851475143ULL, {{71, 1}, {839, 1}, {1471, 1}, {6857, 1}});
  expect(1000000000000ULL, {{2, 12}, {5, 12}});
  expect(999962000357ULL, {{999979, 1}, {999983, 1}});
  expect(999999000001ULL, {{999999000001ULL, 1}});
  for (std::uint64_t n : {0, 1}) {
    try {
      factorize(n);
      std::cerr << "factorize(" << n << ") did not throw\n";
      ++failures;
    } catch (const std::invalid_argument&) {
    }
  }
  if (failures == 0) std::cout << "all hidden tests passed\n";
  return failures == 0 ? 0 : 1;
}
