#pragma once

#include <cstdint>
#include <utility>
#include <vector>

// factorize returns the prime factorization of n as (prime, exponent) pairs
// in increasing order of the prime; it throws std::invalid_argument for 0
// and 1.
std::vector<std::pair<std::uint64_t, int>> factorize(std::uint64_t n);
