#include "jinja/lexer.h"

#include <cctype>
#include <cstdint>

#include "jinja/value.h"

namespace sb::jinja {

namespace {

std::string normalise_newlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// Python's \s on the code points of a UTF-8 string.
size_t whitespace_len_at(std::string_view s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return py_isspace(c) ? 1 : 0;
  std::vector<uint32_t> cp = code_points(s.substr(i, std::min<size_t>(4, s.size() - i)));
  if (cp.empty() || !py_isspace(cp[0])) return 0;
  return cp[0] < 0x800 ? 2 : 3;
}

std::string rstrip_ws(std::string_view s) { return py_strip(s, nullptr, false, true); }

bool all_whitespace(std::string_view s) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size();) {
    size_t n = whitespace_len_at(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      size_t start = next_tag(pos_);
      if (start == std::string::npos) {
        emit_data(src_.substr(pos_), at(pos_));
        pos_ = src_.size();
        break;
      }
      char kind = src_[start + 1];  // '{', '%' or '#'
      char sign = start + 2 < src_.size() ? src_[start + 2] : 0;
      std::string data = src_.substr(pos_, start - pos_);
      if (sign == '-') {
        data = rstrip_ws(data);
      } else if (sign != '+' && kind != '{') {
        size_t l = data.rfind('\n');
        size_t l_pos = l == std::string::npos ? 0 : l + 1;
        if ((l_pos > 0 || line_starting) && all_whitespace(std::string_view(data).substr(l_pos))) data.resize(l_pos);
      }
      emit_data(data, at(pos_));
      size_t body = start + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (kind == '#') {
        line_starting = comment(start, body);
      } else if (kind == '%' && raw_block(start, body, &line_starting)) {
        // handled
      } else {
        line_starting = tag(start, body, kind == '%');
      }
    }
    out_.push_back({Tok::kEof, "", at(src_.size())});
    return std::move(out_);
  }

 private:
  Pos at(size_t offset) {
    // Positions are asked for in increasing order: advance incrementally.
    while (scan_ < offset && scan_ < src_.size()) {
      if (src_[scan_] == '\n') {
        ++line_;
        col_ = 1;
      } else if ((static_cast<unsigned char>(src_[scan_]) & 0xC0) != 0x80) {
        ++col_;
      }
      ++scan_;
    }
    return Pos{line_, col_};
  }

  size_t next_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1))
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return std::string::npos;
  }

  void emit_data(const std::string& text, Pos p) {
    if (!text.empty()) out_.push_back({Tok::kData, text, p});
  }

  // After a closing tag at [end, end+len): applies "-" (strip all following
  // whitespace) or trim_blocks (one newline); returns whether what was
  // consumed ends with a newline (jinja2's line_starting).
  bool after_close(size_t after, char sign, bool trim_newline) {
    pos_ = after;
    if (sign == '-') {
      size_t p = pos_;
      while (p < src_.size()) {
        size_t n = whitespace_len_at(src_, p);
        if (n == 0) break;
        p += n;
      }
      bool nl = p > pos_ && src_[p - 1] == '\n';
      pos_ = p;
      return nl;
    }
    if (trim_newline && sign != '+' && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      return true;
    }
    return false;
  }

  bool comment(size_t start, size_t body) {
    size_t end = src_.find("#}", body);
    if (end == std::string::npos) throw TemplateError(at(start), "a comment is not closed with #}");
    char sign = end > body && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : 0;
    return after_close(end + 2, sign, true);
  }

  // {% raw %} ... {% endraw %}: true when this block tag is one.
  bool raw_block(size_t start, size_t body, bool* line_starting) {
    size_t p = body;
    while (p < src_.size() && std::isspace(static_cast<unsigned char>(src_[p]))) ++p;
    if (src_.compare(p, 3, "raw") != 0 || (p + 3 < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[p + 3])) || src_[p + 3] == '_')))
      return false;
    p += 3;
    while (p < src_.size() && std::isspace(static_cast<unsigned char>(src_[p]))) ++p;
    char open_sign = 0;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) open_sign = src_[p++];
    if (src_.compare(p, 2, "%}") != 0) throw TemplateError(at(start), "malformed {% raw %} tag");
    after_close(p + 2, open_sign == '-' ? '-' : '+', false);
    // Find {%[-] endraw [-+]%}.
    for (size_t q = src_.find("{%", pos_); q != std::string::npos; q = src_.find("{%", q + 2)) {
      size_t r = q + 2;
      char lsign = 0;
      if (r < src_.size() && src_[r] == '-') lsign = src_[r++];
      while (r < src_.size() && std::isspace(static_cast<unsigned char>(src_[r]))) ++r;
      if (src_.compare(r, 6, "endraw") != 0) continue;
      r += 6;
      while (r < src_.size() && std::isspace(static_cast<unsigned char>(src_[r]))) ++r;
      char rsign = 0;
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) rsign = src_[r++];
      if (src_.compare(r, 2, "%}") != 0) continue;
      std::string data = src_.substr(pos_, q - pos_);
      if (lsign == '-') data = rstrip_ws(data);
      emit_data(data, at(pos_));
      *line_starting = after_close(r + 2, rsign, true);
      return true;
    }
    throw TemplateError(at(start), "{% raw %} without {% endraw %}");
  }

  // Tokens of an expression or statement tag; returns line_starting.
  bool tag(size_t start, size_t body, bool block) {
    out_.push_back({block ? Tok::kBlockBegin : Tok::kVarBegin, "", at(start)});
    size_t p = body;
    int depth = 0;  // open brackets: "}}" inside {'a': 1} is not an end
    for (;;) {
      while (p < src_.size()) {
        size_t n = whitespace_len_at(src_, p);
        if (n == 0) break;
        p += n;
      }
      if (p >= src_.size()) throw TemplateError(at(start), block ? "a {% tag is not closed with %}" : "a {{ tag is not closed with }}");
      if (depth == 0) {
        const char* close = block ? "%}" : "}}";
        char sign = 0;
        size_t q = p;
        if (src_[q] == '-' || (block && src_[q] == '+')) sign = src_[q++];
        if (src_.compare(q, 2, close) == 0) {
          out_.push_back({block ? Tok::kBlockEnd : Tok::kVarEnd, "", at(p)});
          return after_close(q + 2, sign, block);
        }
      }
      Pos tp = at(p);
      char c = src_[p];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = p;
        while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        out_.push_back({Tok::kName, src_.substr(p, e - p), tp});
        p = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        p = number(p, tp);
      } else if (c == '\'' || c == '"') {
        p = string_literal(p, tp);
      } else {
        static const char* kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[", "]", "(",
                                     ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"};
        bool matched = false;
        for (const char* op : kOps) {
          size_t len = std::char_traits<char>::length(op);
          if (src_.compare(p, len, op) == 0) {
            if (op[0] == '(' || op[0] == '[' || op[0] == '{') ++depth;
            if ((op[0] == ')' || op[0] == ']' || op[0] == '}') && depth > 0) --depth;
            out_.push_back({Tok::kOp, op, tp});
            p += len;
            matched = true;
            break;
          }
        }
        if (!matched) throw TemplateError(tp, std::string("unexpected character '") + c + "'");
      }
    }
  }

  size_t number(size_t p, Pos tp) {
    auto digits = [&](size_t q) {
      size_t s = q;
      while (q < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[q])) ||
                                 (src_[q] == '_' && q > s && q + 1 < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q + 1])))))
        ++q;
      return q;
    };
    size_t e = digits(p);
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      e = digits(e + 1);
      is_float = true;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t q = e + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q]))) {
        e = digits(q);
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = p; i < e; ++i)
      if (src_[i] != '_') text.push_back(src_[i]);
    out_.push_back({is_float ? Tok::kFloat : Tok::kInt, text, tp});
    return e;
  }

  // Python string-literal escapes, as jinja2 decodes them (unicode-escape).
  size_t string_literal(size_t p, Pos tp) {
    char q = src_[p];
    std::string v;
    size_t i = p + 1;
    auto hex = [&](size_t at, int n, uint32_t* cp) {
      if (at + n > src_.size()) return false;
      uint32_t x = 0;
      for (int k = 0; k < n; ++k) {
        char h = src_[at + k];
        if (!std::isxdigit(static_cast<unsigned char>(h))) return false;
        x = x * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
      }
      *cp = x;
      return true;
    };
    auto put = [&](uint32_t cp) { v += from_code_points({cp}, 0, 1); };
    while (i < src_.size() && src_[i] != q) {
      if (src_[i] != '\\' || i + 1 >= src_.size()) {
        v.push_back(src_[i++]);
        continue;
      }
      char e = src_[i + 1];
      uint32_t cp = 0;
      switch (e) {
        case '\n': i += 2; continue;
        case '\\': v.push_back('\\'); break;
        case '\'': v.push_back('\''); break;
        case '"': v.push_back('"'); break;
        case 'a': v.push_back('\a'); break;
        case 'b': v.push_back('\b'); break;
        case 'f': v.push_back('\f'); break;
        case 'n': v.push_back('\n'); break;
        case 'r': v.push_back('\r'); break;
        case 't': v.push_back('\t'); break;
        case 'v': v.push_back('\v'); break;
        case 'x':
          if (!hex(i + 2, 2, &cp)) throw TemplateError(tp, "bad \\x escape in a string");
          put(cp);
          i += 4;
          continue;
        case 'u':
          if (!hex(i + 2, 4, &cp)) throw TemplateError(tp, "bad \\u escape in a string");
          put(cp);
          i += 6;
          continue;
        case 'U':
          if (!hex(i + 2, 8, &cp) || cp > 0x10FFFF) throw TemplateError(tp, "bad \\U escape in a string");
          put(cp);
          i += 10;
          continue;
        default:
          if (e >= '0' && e <= '7') {
            size_t k = i + 1;
            while (k < src_.size() && k < i + 4 && src_[k] >= '0' && src_[k] <= '7') cp = cp * 8 + static_cast<uint32_t>(src_[k++] - '0');
            put(cp);
            i = k;
            continue;
          }
          v.push_back('\\');  // unknown escapes stay as written
          v.push_back(e);
      }
      i += 2;
    }
    if (i >= src_.size()) throw TemplateError(tp, "a string literal is not closed");
    out_.push_back({Tok::kString, v, tp});
    return i + 1;
  }

  std::string src_;
  size_t pos_ = 0;
  size_t scan_ = 0;
  int line_ = 1, col_ = 1;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  std::string src = normalise_newlines(source);
  if (!src.empty() && src.back() == '\n') src.pop_back();  // keep_trailing_newline=False
  return Lexer(std::move(src)).run();
}

}  // namespace sb::jinja
