// Checks the model tests share: how far two logit vectors are apart, and a
// file that the loader must refuse with a given message.
#pragma once

#include <initializer_list>
#include <span>
#include <string>

namespace loom::test {

// The largest |a - b| over the largest |b|.
double relative_error(std::span<const float> a, std::span<const float> b);

// Loading `path` on the CPU must throw loom::Error whose message holds every
// needle; the file is removed afterwards.
void expect_load_refused(const std::string& path, std::initializer_list<std::string> needles);

}  // namespace loom::test
