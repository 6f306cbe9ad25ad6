"""Given names and their familiar forms ("Bob" for Robert, "Liz" for Elizabeth, "Kate" for Katherine): the
**nickname** tier of entity resolution (``storage.language.resolve``).

Each group is one formal name with its common spellings and short forms, English-speaking usage. A pair of
words in one group is a nickname pair; a word may sit in several groups ("Alex": Alexander and Alexandra;
"Chris": Christopher and Christine). The tier only ever *proposes* a SAME_AS pair, and only for names of two or
three words whose other words are equal ("Bob Fischer" beside "Robert Fischer"): a lone "Bob" picks out no one,
and two people may well be Robert and Bob.
"""

from __future__ import annotations

from functools import cache

_GROUPS = """
abigail abby abbie gail
alexander alex alec alexis sandy xander
alexandra alex alexa sandra sandy lexi
andrew andy drew
angela angie
anthony tony
barbara barb barbie babs
benjamin ben benny benji
bradley brad
cameron cam
catherine katherine kathryn katharine cathy kathy kate katie cat kat kitty
charles charlie chuck chas
charlotte charlie lottie
christina christine chris chrissy tina
christopher chris kit topher
daniel dan danny
david dave davy
deborah debra debbie deb
donald don donny
dorothy dot dottie
douglas doug
edward ed eddie ted teddy ned
eleanor ellie nell nora
elizabeth elisabeth liz lizzie beth betty betsy eliza libby lisa
emily em emmy
frances fran fanny
francis frank frankie
frederick fred freddie
gabriel gabe
gabriella gabrielle gabby
gregory greg
harold hal harry
henry hank harry hal
jacob jake
james jim jimmy jamie
jennifer jen jenny
jessica jess jessie
jonathan jon jonny
joseph joe joey
joshua josh
judith judy
katherine kate katie kathy kat
kenneth ken kenny
lawrence laurence larry
leonard leo len lenny
margaret maggie meg peggy marge greta
matthew matt
michael mike mikey mick mickey
michelle shelly
nathaniel nathan nate nat
nicholas nick nicky
nicole nikki
patricia pat patty trish tricia
patrick pat paddy
peter pete
philip phillip phil
rebecca becky becca
richard rick ricky rich dick
robert bob bobby rob robbie bert
ronald ron ronnie
samantha sam sammy
samuel sam sammy
stephanie steph
stephen steven steve stevie
susan sue susie suzy
theodore theo ted teddy
thomas tom tommy
timothy tim timmy
victoria vicky tori
vincent vince vinny
walter walt wally
william bill billy will willy liam
zachary zach zack
"""


@cache
def _tables() -> tuple[dict[str, frozenset[int]], dict[str, frozenset[str]]]:
    """Each word's groups, and each word's other forms."""
    groups: dict[str, set[int]] = {}
    for n, line in enumerate(line for line in _GROUPS.split("\n") if line.strip()):
        for word in line.split():
            groups.setdefault(word, set()).add(n)
    others = {
        w: frozenset(v for v, h in groups.items() if v != w and not h.isdisjoint(g))
        for w, g in groups.items()
    }
    return {w: frozenset(g) for w, g in groups.items()}, others


def familiar(a: str, b: str) -> bool:
    """Whether the given names ``a`` and ``b`` (normalised, one word each) are one name's forms: "bob" and
    "robert", "kate" and "katherine"; never a word and itself."""
    return a != b and b in _tables()[1].get(a, frozenset())


def forms(word: str) -> frozenset[str]:
    """Every other form of ``word`` in the groups it belongs to (empty for a name not listed)."""
    return _tables()[1].get(word, frozenset())
