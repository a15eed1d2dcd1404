"""One escaping function per output syntax, for every string that comes from outside the
toolkit: class names (an image folder's sub-folder names), file and folder names, titles,
recorded options. Each first makes control characters visible (a newline in a class name
is shown as \\n, never breaks a line or a table row), then escapes what its syntax gives
meaning to. JSON needs no function of its own: json.dumps escapes every control character
and quote, and the report embeds no JSON in HTML."""
import html

# C0 controls, DEL and the C1 controls (ESC sequences and their 8-bit forms recolour or
# rewrite a terminal; U+2028/U+2029 break lines in some viewers).
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\e"}


def visible(text):
    """Control characters written as backslash escapes: "cat\\ndog" stays one line."""
    text = "" if text is None else str(text)
    if not any(ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f or c in "\u2028\u2029" for c in text):
        return text
    out = []
    for c in text:
        o = ord(c)
        if c in _NAMED:
            out.append(_NAMED[c])
        elif o < 0x20 or 0x7f <= o <= 0x9f:
            out.append(f"\\x{o:02x}")
        elif c in "\u2028\u2029":
            out.append(f"\\u{o:04x}")
        else:
            out.append(c)
    return "".join(out)


def html_text(text):
    """Text or an attribute value in HTML: &, <, >, both quotes."""
    return html.escape(visible(text), quote=True)


# CommonMark lets a backslash escape any ASCII punctuation; these are the characters that
# mean something anywhere in a line: emphasis, code, links and images ([ ]), HTML and
# entities, GFM table cells and strikethrough. (Line-start syntax — #, -, 1. — cannot
# arise: the report never starts a line with an outside string.)
_MD_SPECIAL = set("\\`*_[]<>&|~")


def md_text(text):
    """Plain text in Markdown (also inside a GFM table cell): every special character escaped."""
    return "".join("\\" + c if c in _MD_SPECIAL else c for c in visible(text))


def md_code(text):
    """A Markdown code span holding text literally: fenced by one more backtick than the
    longest run inside, padded when it starts or ends with one; `|` escaped, which GFM
    needs even inside code spans in a table."""
    body = visible(text).replace("|", "\\|")
    longest, run = 0, 0
    for c in body:
        run = run + 1 if c == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or not body.strip() else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def plot_text(text):
    """Text drawn by matplotlib: visible controls, and $ escaped (matplotlib reads $…$ as
    mathtext, and an unbalanced $ fails the whole figure)."""
    return visible(text).replace("$", r"\$")
