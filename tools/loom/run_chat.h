// loom run -cnv: an interactive chat on top of a loaded model and session.
#pragma once

#include "loom/model.h"
#include "loom/sampler.h"

namespace loom::cli {

class Args;

// Reads user lines from stdin until end of input; each one is appended as a
// user message, the chat template is rendered with add_generation_prompt,
// only the text after what the session already holds is fed, and the
// answer streams until an end-of-generation token or n_predict tokens.
int run_chat(const Args& args, const Model& model, Session& session, Sampler& sampler, int n_predict);

}  // namespace loom::cli
