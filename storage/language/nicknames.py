"""Given names and their familiar forms ("Bob" for Robert, "Liz" for Elizabeth, "Kate" for Katherine): the
**nickname** tier of entity resolution (``storage.language.resolve``).

Each group is one formal name (its first word) with its common spellings and short forms, English-speaking
usage. A formal name and one of its forms are a nickname pair; two short forms of one name are not ("Bill" and
"Liam" are two names); a word may sit in several groups ("Alex": Alexander and Alexandra; "Chris": Christopher
and Christine). The tier only ever *proposes* a SAME_AS pair, and only for names of two or
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
def _forms() -> dict[str, frozenset[str]]:
    """Each word's other forms: a formal name's familiar forms and spellings, and a familiar form's formal names.
    Two familiar forms of one name are not each other's ("Bill" and "Liam" are both William's, and two names)."""
    forms: dict[str, set[str]] = {}
    for line in _GROUPS.split("\n"):
        formal, *others = line.split() or [""]
        for other in others:
            if other != formal:
                forms.setdefault(formal, set()).add(other)
                forms.setdefault(other, set()).add(formal)
    return {w: frozenset(f) for w, f in forms.items()}


def familiar(a: str, b: str) -> bool:
    """Whether the given names ``a`` and ``b`` (normalised, one word each) are a formal name and one of its
    forms: "bob" and "robert", "kate" and "katherine"; never a word and itself, never two short forms."""
    return a != b and b in _forms().get(a, frozenset())


def forms(word: str) -> frozenset[str]:
    """The words ``familiar`` pairs with ``word`` (empty for a name not listed)."""
    return _forms().get(word, frozenset())
