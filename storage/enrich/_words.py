"""Word lists the offline extractor reads: role nouns, organisation and place cues, assertion cues.

Kept apart from the logic so a curated case that fails for want of a word is fixed here, in one place.
"""

from __future__ import annotations


def word_set(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text`` (lists are written as prose to stay readable)."""
    return frozenset(text.split())


# Relationship nouns after "my" (or "NAME is my ..."): the predicate linking the speaker to that person.
KIN: dict[str, str] = {
    "wife": "married_to", "husband": "married_to", "spouse": "married_to",
    "sister": "sibling_of", "brother": "sibling_of", "sibling": "sibling_of", "twin": "sibling_of",
    "friend": "friend_of", "bestie": "friend_of", "buddy": "friend_of", "roommate": "friend_of",
    "son": "parent_of", "daughter": "parent_of", "kid": "parent_of", "child": "parent_of",
    "mom": "child_of", "mum": "child_of", "mother": "child_of", "dad": "child_of", "father": "child_of",
    "girlfriend": "partner_of", "boyfriend": "partner_of", "partner": "partner_of", "fiancee": "partner_of",
    "fiance": "partner_of", "fiancé": "partner_of", "fiancée": "partner_of",
    "colleague": "colleague_of", "coworker": "colleague_of", "co-worker": "colleague_of",
    "boss": "reports_to", "manager": "reports_to",
    "neighbor": "neighbor_of", "neighbour": "neighbor_of", "cousin": "cousin_of",
    "aunt": "relative_of", "uncle": "relative_of", "niece": "relative_of", "nephew": "relative_of",
    "grandma": "relative_of", "grandpa": "relative_of", "grandmother": "relative_of",
    "grandfather": "relative_of", "doctor": "patient_of", "dentist": "patient_of", "therapist": "patient_of",
}  # fmt: skip
KIN_MODIFIERS = frozenset(
    ("best", "older", "younger", "little", "big", "old", "new", "good", "close", "twin")
)

# The last word of a job title ("senior software engineer", "head nurse", "CTO").
ROLE_HEADS = word_set(
    """engineer developer programmer designer architect manager director teacher professor lecturer nurse
    doctor physician surgeon dentist lawyer attorney accountant analyst scientist researcher consultant
    chef cook baker waiter waitress barista pharmacist therapist psychologist journalist writer editor
    author photographer artist musician pilot driver mechanic electrician plumber carpenter farmer
    librarian cashier clerk assistant intern officer ceo cto cfo coo cio founder cofounder
    co-founder owner president vp lead administrator admin technician veterinarian vet paramedic
    firefighter policeman policewoman detective translator interpreter coach trainer tutor
    economist entrepreneur salesperson recruiter receptionist secretary specialist coordinator
    strategist planner producer actor actress dancer singer postdoc principal dean"""
)

ORG_SUFFIXES = word_set(
    """inc inc. corp corp. corporation ltd ltd. llc gmbh sa s.a. ag plc co co. company group bank university
    college school institute hospital clinic labs lab studios studio foundation agency ministry
    department museum airlines airways"""
)
ORG_PREFIXES = frozenset(("university", "bank", "institute", "college", "school", "ministry", "department"))
PERSON_TITLES = frozenset(("dr", "mr", "mrs", "ms", "miss", "prof", "sir", "madam", "aunt", "uncle"))

# A small gazetteer: places whose names alone say "place" (everything else is typed by its context).
PLACES = word_set(
    """lisbon porto madrid barcelona paris lyon london manchester edinburgh dublin berlin munich hamburg
    amsterdam rotterdam brussels vienna zurich geneva rome milan naples florence venice athens prague
    warsaw krakow budapest copenhagen stockholm oslo helsinki reykjavik istanbul moscow kyiv cairo
    nairobi lagos johannesburg cape-town marrakech tokyo kyoto osaka seoul beijing shanghai hong-kong
    taipei singapore bangkok hanoi jakarta manila mumbai delhi bangalore sydney melbourne auckland
    toronto vancouver montreal boston chicago seattle denver austin dallas houston miami atlanta
    brooklyn portland phoenix philadelphia detroit oakland berkeley sacramento lima bogota santiago
    quito caracas havana mexico buenos rio sao brazil argentina chile peru colombia portugal spain
    france germany italy greece ireland scotland england wales netherlands belgium austria switzerland
    poland sweden norway denmark finland iceland russia ukraine turkey egypt kenya nigeria morocco
    japan china korea india thailand vietnam indonesia australia canada usa america california texas
    florida oregon washington york jersey hawaii alaska bali tuscany provence bavaria"""
)

# Assertion cues (lower case, matched as whole tokens or token sequences).
NEGATION = frozenset(("not", "never", "no", "nobody", "neither", "nor", "without"))
ENDED = (("no", "longer"), ("any", "more"), ("anymore",))
HYPOTHETICAL = (
    ("if",), ("unless",), ("whether",), ("would",), ("'d",), ("could",), ("should",), ("wish",),
    ("want", "to"), ("wants", "to"), ("wanted", "to"), ("wanna",), ("hope", "to"), ("hopes", "to"),
    ("hoping", "to"), ("plan", "to"), ("plans", "to"), ("planning", "to"), ("planning", "on"),
    ("thinking", "about"), ("thinking", "of"), ("considering",), ("consider",), ("going", "to"),
    ("gonna",), ("will",), ("'ll",), ("dream", "of"), ("dreaming", "of"), ("imagine",), ("suppose",),
    ("someday",), ("one", "day"), ("might", "move"), ("in", "case"), ("about", "to"), ("shall",),
    ("pretend",), ("hypothetically",), ("let's", "say"),
)  # fmt: skip
UNCERTAIN = (
    ("maybe",), ("perhaps",), ("probably",), ("possibly",), ("might",), ("may",), ("i", "think"),
    ("i", "guess"), ("i", "believe"), ("not", "sure"), ("unsure",), ("seems",), ("seem",), ("likely",),
    ("supposedly",), ("presumably",), ("i", "suspect"), ("doubt",), ("kind", "of"), ("sort", "of"),
)  # fmt: skip
REPORTED = (
    ("said",), ("says",), ("say",), ("told",), ("tells",), ("claims",), ("claimed",), ("claim",),
    ("heard",), ("according", "to"), ("rumor",), ("rumour",), ("rumored",), ("rumoured",),
    ("apparently",), ("reportedly",), ("allegedly",), ("mentioned",), ("mentions",), ("thinks",),
    ("believes",), ("insists",), ("swears",),
)  # fmt: skip
# Verbs of saying whose subject "I" keeps the statement the speaker's own ("I told Tom I live in Porto").
SELF_REPORT_OK = frozenset(("said", "say", "says", "told", "tells", "mentioned", "claim", "claimed"))

# Words that may sit between a subject and its verb without changing who the subject is.
BETWEEN = word_set(
    """also now currently still recently just finally already actually really always has have had 've 's 'm
    am is are was were be been being got get gets do does did totally absolutely truly definitely so very
    much even officially happily newly not never no longer 'd would will 'll might may could should
    probably maybe perhaps who a an"""
)
DETERMINERS = frozenset(("a", "an", "the", "some", "any", "this", "that", "these", "those", "my", "our", "his",
                         "her", "their", "your", "its", "lots", "lot", "of"))  # fmt: skip
OBJECT_STOPS = word_set(
    """and or but , . ; : ! ? in on at for with because when since from during after before until till
    to by as than while whereas though although so who which that where there now then too very also
    every each since ever yet — - ( ) " “ ” ' anymore last next yesterday today tomorrow tonight ago recently"""
)
# Words that end a noun phrase after its first word when a comparison follows: "tea over coffee", "jazz rather
# than rock", "tea more than coffee", "Python versus Go" (the object is the first thing named, not the comparison).
# "over" a place and "more"/"less" a quantity are none (``_statements._compares``).
COMPARISONS = word_set("over rather instead versus vs vs. more less unlike compared not")
PRONOUN_OBJECTS = frozenset(("it", "them", "that", "this", "you", "him", "her", "me", "us", "one", "those",
                             "these", "everything", "anything", "nothing", "something", "everyone", "all"))  # fmt: skip
