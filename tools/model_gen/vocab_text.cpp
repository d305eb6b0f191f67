// The text generated vocabularies are learned from: a few paragraphs of
// plain English (with some numbers, contractions, punctuation and a handful
// of non-ASCII words), so that pieces look like a real model's.
#include "model_gen/vocab_gen.h"

namespace loom {

std::string_view vocab_training_text() {
  static constexpr std::string_view kText =
      "The loom is one of the oldest machines people have built. Long before there were engines or clocks, "
      "weavers stretched a set of threads, the warp, between two beams and passed another thread, the weft, "
      "over and under them, row after row, until the threads became cloth. The pattern in the cloth comes "
      "from the order in which the warp threads are lifted: lift every other thread and you get a plain "
      "weave; lift them in a shifting order and you get a twill, with its diagonal lines.\n\n"
      "In 1804 Joseph Marie Jacquard showed a loom that read its pattern from a chain of punched cards. "
      "Each card held one row of the design, and each hole decided whether a hook would lift its thread. "
      "It's often said that this was the first machine to be programmed, and it's not hard to see why: "
      "the same loom could weave a flower, a portrait or a page of text, and changing the design meant "
      "changing the cards, not the machine. Charles Babbage planned to feed his Analytical Engine with "
      "cards of the same kind, and Ada Lovelace wrote that it would weave algebraic patterns just as the "
      "Jacquard loom weaves flowers and leaves.\n\n"
      "A modern computer works on numbers rather than threads, but the picture still fits. A tensor is a "
      "block of numbers with a shape, such as 4096 rows by 4096 columns, and a model is a long list of "
      "operations that turn some tensors into others: multiply these two matrices, add that bias, apply "
      "the softmax, normalize the result. We don't run those operations one by one as they're written; "
      "we build a graph of them first, so that we can plan where every tensor will live, which device "
      "will compute each part, and when the data has to move between them.\n\n"
      "The planning matters because memory is small and bandwidth is precious. A processor that can do "
      "469 billion operations per second is idle most of the time if it waits for data that arrives at 36 "
      "gigabytes per second. So we cut the graph into pieces, place each piece where its weights already "
      "are, and copy only the small activations that cross from one device to the next. When the plan is "
      "good, the devices work like the hands of a weaver: one throws the shuttle while the other beats the "
      "weft into place, and neither waits for long.\n\n"
      "Language models read text as tokens. A tokenizer breaks a sentence into pieces that are common "
      "enough to deserve their own number: whole words such as \"the\" or \"model\", parts of words such "
      "as \"ing\" or \"tion\", and single letters or bytes for everything else. They've been built in many "
      "ways. Some learn their pieces by merging the most frequent pairs of symbols again and again; others "
      "keep a score for every piece and choose the best way to cut each word. Either way, the tokenizer "
      "must give exactly the same numbers that the model saw while it was trained, or the model will read "
      "nonsense. I'm sure you'll agree that a single wrong token at the start of a prompt can change what "
      "comes out at the end.\n\n"
      "Names and words from other languages need care as well: a caf\xC3\xA9 in Z\xC3\xBCrich, a na\xC3\xAFve "
      "question, a fa\xC3\xA7" "ade of stone, the word \xD0\xBC\xD0\xB8\xD1\x80 in Russian, the city of "
      "\xE6\x9D\xB1\xE4\xBA\xAC, or a small \xF0\x9F\xA7\xB5 for thread. When a piece is missing, the "
      "tokenizer falls back to bytes, so no text is ever lost. He'd say the rule is simple: everything "
      "that goes in must come out again, byte for byte, 100% of the time.\n\n"
      "Weaving taught people to think in rows and columns, in repeats and in patterns that fit together. "
      "The first punched cards, the first programs and the first tables of numbers all owe something to "
      "the cloth makers who counted threads by hand. When we write a kernel that walks over a matrix in "
      "tiles of 16 by 16, keeping each tile in the fastest memory while we use it, we are doing what the "
      "weaver did: working on a small part of the whole, in an order that makes the work flow.\n";
  return kText;
}

}  // namespace loom
