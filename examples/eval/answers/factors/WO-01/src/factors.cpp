#include "factors.hpp"

#include <stdexcept>
#include <string>

std::vector<std::pair<std::uint64_t, int>> factorize(std::uint64_t n) {
  if (n < 2) {
    throw std::invalid_argument("factorize(" + std::to_string(n) + "): only numbers from 2 up have prime factors");
  }
  std::vector<std::pair<std::uint64_t, int>> out;
  for (std::uint64_t p = 2; p <= n / p; ++p) {
    int e = 0;
    for (; n % p == 0; n /= p) ++e;
    if (e > 0) out.emplace_back(p, e);
  }
  if (n > 1) out.emplace_back(n, 1);
  return out;
}
