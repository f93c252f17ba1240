"""A web search query built from the user's question, not the whole prompt. Pure; linear in the text.

How this works: the question is the last sentence that ends in ``?`` (else the first sentence) of the last
paragraph, capped at 2,000 characters; quoted phrases are kept whole; words are lower-cased and question words,
politeness and other stop words (English, Dutch, German, French) are dropped; at most ``max_words`` words remain,
in their order. When nothing is left (a question made only of stop words) the question itself is the query.
``search_query("Hey, could you please tell me what the latest news about the Mars rover is? Thanks!")`` ->
``"latest news mars rover"``.
"""

from __future__ import annotations

import re

__all__ = ["search_query"]

_STOP = frozenset(
    """
a an the and or but of to in on at for from by with about into over after before is are was were be been being am
do does did doing have has had i me my we our you your he she it its they them their this that these those there
here what which who whom whose when where why how can could would should will shall may might must please tell show
give find search web internet online look up let know want need like just hey hi hello thanks thank some any much
many more most very really also so if then than as not no yes ok okay
de het een en of maar van naar in op aan voor met over bij uit is zijn was waren ben bent wordt worden heb hebt heeft
hebben ik mij me mijn we wij ons onze jij je jou jouw u uw hij zij ze het wat welke welk wie waar wanneer waarom hoe
kan kun kunt kunnen zou zouden wil wilt willen graag alsjeblieft alstublieft vertel zoek eens even er dat dit deze die
der die das ein eine einen einem einer und oder aber von zu im am an auf für mit über bei aus ist sind war waren bin
bist wird werden habe hast hat haben ich mich mein wir uns unser du dich dein sie er es was welche welcher welches wer
wo wann warum wie kann kannst können würde würden bitte sag sage such suche mal mir
le la les un une des du et ou mais de à au aux en sur pour avec par dans est sont était étaient suis es être ai as a
ont je moi mon ma mes nous notre vous votre il elle ils elles ce cette ces que qui quoi quel quelle quels quelles où
quand pourquoi comment peux peut pouvez pourrais voudrais veux s'il plaît dis dites cherche trouve
""".split()  # noqa: SIM905 (a word list reads better as text)
)
_PHRASE = re.compile(r'"([^"]{1,80})"|“([^”]{1,80})”')
_WORD = re.compile(r"[^\W_]+(?:[-'.][^\W_]+)*", re.UNICODE)
_SENTENCE = re.compile(r"[^.?!\n]*\?|[^.?!\n]+")


def _question(text: str) -> str:
    paragraphs = [p for p in re.split(r"\n\s*\n", text.strip()[-2000:]) if p.strip()]
    last = paragraphs[-1] if paragraphs else text
    sentences = [s.strip() for s in _SENTENCE.findall(last) if s.strip()]
    asked = [s for s in sentences if s.endswith("?")]
    if asked:
        return str(asked[-1])
    return str(sentences[0]) if sentences else last.strip()


def search_query(text: str, *, max_words: int = 12) -> str:
    """The query for ``text`` (see the module docstring). Never empty for non-empty text."""
    question = _question(text)
    words: list[str] = []
    for match in _PHRASE.finditer(question):
        words.append(f'"{match.group(1) or match.group(2)}"')
    rest = _PHRASE.sub(" ", question)
    for word in _WORD.findall(rest):
        lowered = word.lower()
        if lowered not in _STOP and lowered not in words:
            words.append(lowered)
        if len(words) >= max_words:
            break
    query = " ".join(words[:max_words])
    return query or question.strip()[:200] or text.strip()[:200]
