#include "factors.hpp"

#include <stdexcept>

std::vector<std::pair<std::uint64_t, int>> factorize(std::uint64_t) {
  throw std::logic_error("not implemented");
}
