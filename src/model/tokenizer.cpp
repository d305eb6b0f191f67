// Tokenizer: encode (special-token partition, then SPM, BPE, WPM or UGM per
// text fragment), token pieces and decode, following llama.cpp's llama-vocab.
#include "loom/tokenizer.h"

#include "loom/error.h"
#include "tokenizer_internal.h"

namespace loom {
namespace {

using tok::kEscapedSpace;

// White space as C's isspace sees it in the "C" locale (llama.cpp's test for
// stripping beside special tokens); bytes of UTF-8 sequences are not.
bool is_c_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (true) {
    const size_t hit = text.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos)).append(to);
    pos = hit + from.size();
  }
  out.append(text.substr(pos));
  return out;
}

// A stretch of the input: raw text, or a special token found in it.
struct Fragment {
  int32_t token;  // kNoToken for raw text
  size_t begin, length;
};

// Undoes the spaces a BPE detokenizer leaves before punctuation and in
// contractions (" ." -> ".", " 's" -> "'s"), in place, pass by pass, with
// exactly llama.cpp's rules.
void clean_up_spaces(std::string& s) {
  auto pass = [&s](auto&& visit) {
    const size_t n = s.size();
    size_t total = n ? 1 : 0;
    for (size_t i = 1; i < n; ++i) visit(i, total, n);
    s.resize(total);
  };
  pass([&s](size_t& i, size_t& total, size_t) {
    const char x = s[i];
    if (s[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    s[total++] = x;
  });
  pass([&s](size_t& i, size_t& total, size_t n) {
    const char x = s[i];
    if (x == '\'' && i + 1 < n && s[i - 1] == ' ' && s[i + 1] == ' ') {
      --total;
      s[++i] = '\0';
    }
    s[total++] = x;
  });
  pass([&s](size_t& i, size_t& total, size_t n) {
    const char x = s[i];
    if (s[i - 1] == ' ' && x == '\'' && i + 1 < n) {
      const char x1 = s[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --total;
      } else if (x1 != 't' && x1 != 'd' && i + 2 < n) {
        const char x2 = s[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
      }
    }
    s[total++] = x;
  });
}

}  // namespace

std::string Tokenizer::Impl::piece(int32_t token, bool render_special) const {
  const TokenType type = types[token];
  const std::string& text = texts[token];
  if (kind == TokenizerKind::Rwkv)  // every type is its bytes
    return render_special || (type != TokenType::Control && type != TokenType::Unknown) ? tok::rwkv_unescape(text)
                                                                                          : std::string();
  switch (type) {
    case TokenType::Control:
    case TokenType::Unknown: return render_special ? text : std::string();
    case TokenType::UserDefined: return text;
    case TokenType::Byte:
      if (text.size() == 6 && text.starts_with("<0x"))
        return std::string(1, static_cast<char>(std::stoi(text.substr(3, 2), nullptr, 16)));
      return {};
    case TokenType::Normal:
      if (kind != TokenizerKind::Bpe || escape_spaces) return replace_all(text, kEscapedSpace, " ");
      {
        std::string out;
        for (uint32_t cpt : tok::decode_utf8(text)) {
          std::string symbol;
          tok::append_utf8(symbol, cpt);
          const int byte = tok::symbol_to_byte(symbol);
          if (byte >= 0) {
            out += static_cast<char>(byte);
          } else {  // not a byte-level symbol: shown the way llama.cpp shows it
            out += "[UNK_BYTE_0x";
            for (unsigned char c : symbol) out += fmt::format("{:02x}", c);
            out += text + "]";
          }
        }
        return out;
      }
    case TokenType::Unused:
    case TokenType::Undefined: break;
  }
  return {};
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const Impl& t = *impl_;
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back({kNoToken, 0, text.size()});

  // Which special tokens occur in the text at all (a trie walk per offset).
  std::vector<uint8_t> occurs(t.texts.size(), 0);
  bool any = false;
  for (size_t start = 0; start < text.size() && !t.special_trie.empty(); ++start) {
    int32_t node = 0;
    for (size_t i = start; i < text.size(); ++i) {
      node = t.special_trie.child(node, static_cast<unsigned char>(text[i]));
      if (node < 0) break;
      if (const int32_t id = t.special_trie.token(node); id != kNoToken) {
        occurs[id] = 1;
        any = true;
      }
    }
  }
  // Longest special token first: split every raw fragment at each occurrence.
  for (int32_t id : t.special_tokens) {
    if (!any) break;
    if (!occurs[id]) continue;
    if (!parse_special && (t.types[id] == TokenType::Control || t.types[id] == TokenType::Unknown)) continue;
    const std::string& special = t.texts[id];
    std::vector<Fragment> next;
    for (const Fragment& f : fragments) {
      if (f.token != kNoToken) {
        next.push_back(f);
        continue;
      }
      const std::string_view window = text.substr(0, f.begin + f.length);
      size_t cursor = f.begin;
      for (size_t hit = window.find(special, cursor); hit != std::string_view::npos; hit = window.find(special, cursor)) {
        size_t left_end = hit;
        if (t.strip[id] & Impl::kStripLeft)
          while (left_end > cursor && is_c_space(window[left_end - 1])) --left_end;
        if (left_end > cursor) next.push_back({kNoToken, cursor, left_end - cursor});
        next.push_back({id, hit, special.size()});
        cursor = hit + special.size();
        if (t.strip[id] & Impl::kStripRight)
          while (cursor < window.size() && is_c_space(window[cursor])) ++cursor;
      }
      if (cursor < f.begin + f.length) next.push_back({kNoToken, cursor, f.begin + f.length - cursor});
    }
    fragments = std::move(next);
  }

  // WordPiece: add_special always wraps the text in [CLS] ... [SEP], as llama.cpp does.
  const bool wpm = t.kind == TokenizerKind::Wpm;
  std::vector<int32_t> out;
  if (add_special && (t.add_bos || wpm)) out.push_back(t.bos);
  bool previous_special = true;  // SPM: the text after a special token (or at the start) gets a space prefix
  for (const Fragment& f : fragments) {
    if (f.token != kNoToken) {
      out.push_back(f.token);
      previous_special = true;
      continue;
    }
    const std::string_view raw = text.substr(f.begin, f.length);
    if (t.kind == TokenizerKind::Spm) {
      std::string prefixed = t.add_space_prefix && previous_special ? " " : "";
      prefixed.append(raw);
      t.spm_tokenize(replace_all(prefixed, " ", kEscapedSpace), out);
    } else if (wpm) {
      t.wpm_tokenize(raw, out);
    } else if (t.kind == TokenizerKind::Ugm) {
      t.unigram->tokenize(raw, out);
    } else if (t.kind == TokenizerKind::Rwkv) {
      t.rwkv_tokenize(raw, out);
    } else if (t.escape_spaces) {
      t.bpe_tokenize(replace_all(raw, " ", kEscapedSpace), out);
    } else {
      t.bpe_tokenize(raw, out);
    }
    previous_special = false;
  }
  if (add_special && wpm) out.push_back(t.sep);
  else if (add_special && t.add_eos) out.push_back(t.eos);
  return out;
}

std::string Tokenizer::token_to_piece(int32_t token, bool render_special) const {
  if (token < 0 || token >= n_vocab()) fail("tokenizer: token {} is outside the vocabulary of {} tokens", token, n_vocab());
  const TokenType type = impl_->types[token];
  if (!render_special && (type == TokenType::Control || type == TokenType::Unknown)) return {};
  return impl_->pieces[token];
}

std::string Tokenizer::decode(std::span<const int32_t> tokens, bool render_special) const {
  std::string out;
  bool strip_space = impl_->add_space_prefix;  // the prefix space encode added
  for (int32_t token : tokens) {
    std::string piece = token_to_piece(token, render_special);
    if (strip_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    strip_space = false;
    out += piece;
  }
  if (impl_->clean_spaces) clean_up_spaces(out);
  return out;
}

TokenizerKind Tokenizer::kind() const { return impl_->kind; }
PreTokenizer Tokenizer::pre_tokenizer() const { return impl_->pre; }
const std::string& Tokenizer::model_name() const { return impl_->model; }
const std::string& Tokenizer::pre_name() const { return impl_->pre_name; }
int32_t Tokenizer::n_vocab() const { return static_cast<int32_t>(impl_->texts.size()); }
int32_t Tokenizer::bos() const { return impl_->bos; }
int32_t Tokenizer::eos() const { return impl_->eos; }
int32_t Tokenizer::unk() const { return impl_->unk; }
int32_t Tokenizer::pad() const { return impl_->pad; }
int32_t Tokenizer::sep() const { return impl_->sep; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }
bool Tokenizer::add_eos() const { return impl_->add_eos; }
bool Tokenizer::add_space_prefix() const { return impl_->add_space_prefix; }
bool Tokenizer::is_eog(int32_t token) const { return impl_->eog.count(token) > 0; }
int32_t Tokenizer::find_token(std::string_view text) const { return impl_->lookup(text); }

const std::string& Tokenizer::token_text(int32_t token) const {
  if (token < 0 || token >= n_vocab()) fail("tokenizer: token {} is outside the vocabulary of {} tokens", token, n_vocab());
  return impl_->texts[token];
}
TokenType Tokenizer::token_type(int32_t token) const {
  if (token < 0 || token >= n_vocab()) fail("tokenizer: token {} is outside the vocabulary of {} tokens", token, n_vocab());
  return impl_->types[token];
}
float Tokenizer::token_score(int32_t token) const {
  if (token < 0 || token >= n_vocab()) fail("tokenizer: token {} is outside the vocabulary of {} tokens", token, n_vocab());
  return impl_->scores[token];
}

}  // namespace loom
