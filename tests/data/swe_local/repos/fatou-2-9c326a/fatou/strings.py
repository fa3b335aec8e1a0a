"""Text helpers: padding, shortening, counting words and capitalizing titles."""


def truncate(text: str, width: int = 10, marker: str = "...") -> str:
    """Shorten ``text`` to at most ``width`` characters, ending with ``marker`` when cut.

    Text of ``width`` characters or fewer comes back unchanged. Longer text keeps its first
    ``width - len(marker)`` characters followed by the marker, so the result is exactly
    ``width`` characters long; when ``width`` leaves no room for the marker, the result is
    the first ``width`` characters of the text. ``truncate("hello world", 8)`` is
    ``"hello..."``.
    """
    if len(text) <= width:
        return text
    if width <= len(marker):
        return text[:width]
    return text[:width - len(marker)] + marker


def pad_left(text: str, width: int, fill: str = "0") -> str:
    """Return ``text`` padded on the left with ``fill`` up to ``width`` characters.

    Text of ``width`` characters or more comes back unchanged:
    ``pad_left("7", 3)`` is ``"007"`` and ``pad_left("1234", 3)`` is ``"1234"``.
    """
    missing = width - len(text)
    if missing <= 0:
        return text
    return fill * missing + text


def title_case(text: str) -> str:
    """Capitalize each word of ``text``, except the small words "a", "an", "of", "the" and
    "and", which stay lower case unless they come first. Runs of spaces become one space.

    ``title_case("the lord of the rings")`` is ``"The Lord of the Rings"``.
    """
    words = []
    for index, word in enumerate(text.lower().split()):
        if index > 0 and word in ("a", "an", "of", "the", "and"):
            words.append(word)
        else:
            words.append(word[:1].upper() + word[1:])
    return " ".join(words)


def initials(name: str) -> str:
    """Return the initials of ``name``: the first letter of each word, upper-cased and
    followed by a dot.

    ``initials("ada king lovelace")`` is ``"A.K.L."``; a blank name gives ``""``.
    """
    letters = []
    for part in name.split():
        letters.append(part[0].upper() + ".")
    return "".join(letters)
