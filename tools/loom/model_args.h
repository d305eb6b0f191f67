// Options shared by the commands that load a model (run, eval): the model
// path (or the built-in default), threads, context, batch and cache types.
#pragma once

#include <string>

#include "args.h"
#include "loom/model.h"

namespace loom::cli {

std::vector<OptionSpec> model_option_specs();
// The -m path, or the built-in default model (generated on first use).
std::string model_path(const Args& args);
LoadOptions load_options(const Args& args);
SessionOptions session_options(const Args& args);
// -fa's value: on, off, auto (and llama-bench's 1 and 0).
FlashAttn parse_flash_attn(const std::string& flag, const std::string& value);
// The default model's path in the user's cache, creating it when missing.
std::string default_model_path();

}  // namespace loom::cli
