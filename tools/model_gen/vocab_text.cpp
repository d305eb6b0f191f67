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

std::string_view vocab_mixed_text() {
  static constexpr std::string_view kText =
      "Numbers such as 1234567, 12345678901, 1,000,000, 3.14159 and 007; version v2.0.1 of 2024-01-15 costs "
      "$1999.99 (#42), x12345 and abc123def.\n"
      "camelCaseWord HTTPServer iPhone XMLHttpRequest \xC3\x84\xC3\x96\xC3\x9C\xC3\xA4\xC3\xB6\xC3\xBC "
      "\xC7\x85ungla \xC3\x9Cole DON'T I'LL WE'VE SHE'D l'homme d'accord 'quoted'\n"
      // Korean, jamo, bopomofo, kana, kanji, half-width kana, Chinese with full-width punctuation
      "\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 \xED\x85\x8D\xEC\x8A\xA4\xED\x8A\xB8 "
      "\xE3\x84\xB1\xE3\x84\xB4\xE3\x84\xB7 \xE3\x84\x85\xE3\x84\x86\xE3\x84\x87 "
      "\xE3\x81\xB2\xE3\x82\x89\xE3\x81\x8C\xE3\x81\xAA\xE3\x82\xAB\xE3\x82\xBF\xE3\x82\xAB"
      "\xE3\x83\x8A\xE6\xBC\xA2\xE5\xAD\x97\xEF\xBD\xB6\xEF\xBE\x80\xEF\xBD\xB6\xEF\xBE\x85 "
      "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xE3\x80\x82"
      "\xE6\x9D\xB1\xE4\xBA\xAC\xE3\x81\xAF\xE6\x97\xA5\xE6\x9C\xAC\xE3\x81\xAE\xE9\xA6\x96"
      "\xE9\x83\xBD\xE3\x81\xA7\xE3\x81\x99\xE3\x80\x82\n"
      // Thai, Khmer, Hindi and Bengali (combining marks), Urdu and Arabic punctuation, Greek, Russian
      "\xE0\xB8\xA0\xE0\xB8\xB2\xE0\xB8\xA9\xE0\xB8\xB2\xE0\xB9\x84\xE0\xB8\x97\xE0\xB8\xA2 "
      "\xE1\x9E\x97\xE1\x9E\xB6\xE1\x9E\x9F\xE1\x9E\xB6 "
      "\xE0\xA4\xB9\xE0\xA4\xBF\xE0\xA4\xA8\xE0\xA5\x8D\xE0\xA4\xA6\xE0\xA5\x80 "
      "\xE0\xA4\xAD\xE0\xA4\xBE\xE0\xA4\xB7\xE0\xA4\xBE\xE0\xA5\xA4 "
      "\xE0\xA6\xAC\xE0\xA6\xBE\xE0\xA6\x82\xE0\xA6\xB2\xE0\xA6\xBE "
      "\xD8\xA7\xD8\xB1\xD8\xAF\xD9\x88\xDB\x94 \xD8\xB9\xD8\xB1\xD8\xA8\xD9\x8A\xD8\x8C "
      "\xCE\x95\xCE\xBB\xCE\xBB\xCE\xB7\xCE\xBD\xCE\xB9\xCE\xBA\xCE\xAC "
      "\xD0\x9C\xD0\xBE\xD1\x81\xD0\xBA\xD0\xB2\xD0\xB0\n"
      // full-width forms, typographic quotes and dashes, punctuation runs before newlines
      "\xEF\xBC\xA1\xEF\xBC\xA2\xEF\xBC\xA3\xEF\xBC\x91\xEF\xBC\x92\xEF\xBC\x93\xEF\xBC\x81"
      "\xEF\xBC\x9F \xE2\x80\x9Cquoted\xE2\x80\x9D \xE2\x80\x98single\xE2\x80\x99 \xE2\x80\x94 "
      "dash\xE2\x80\xA6 !!!\n\nfoo/\nbar a/b//c ...\r\n?!?\n"
      // code with indentation, tabs and whitespace runs
      "def f(x):\n    return x**2  # square\n\n\tif (a && b) { sum += a[i]; }\n"
      "x                    y       z   \n"
      // emoji, combining marks, chameleon-style markers
      "\xF0\x9F\xA7\xB5\xF0\x9F\xA7\xB6 \xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB "
      "e\xCC\x81 n\xCC\x83 <sentinel:12> IMGIMGABCZ\n";
  return kText;
}

}  // namespace loom
