#include "support/model_checks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "loom/error.h"
#include "loom/model.h"
#include "loom/registry.h"

namespace loom::test {

double relative_error(std::span<const float> a, std::span<const float> b) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return err / scale;
}

void expect_load_refused(const std::string& path, std::initializer_list<std::string> needles) {
  try {
    Model::load(path, {&Registry::get().cpu()});
    ADD_FAILURE() << "loaded " << path;
  } catch (const Error& e) {
    for (const std::string& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

}  // namespace loom::test
