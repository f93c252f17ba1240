"""The IANA time zone of a place named in a question, in English, Dutch, German or French. No IO.

How this works: the text is cut into words (one linear scan), folded (lower case, accents dropped: ``Zürich`` ->
``zurich``, ``São Paulo`` -> ``sao paulo``) and looked up one to three words at a time, longest first, in one table:
the cities of the IANA database itself (``Amsterdam``, ``New York``, ``Tokyo``), plus a small table of what the
database does not know: exonyms (``Tokio``, ``Peking``, ``Londen``, ``Parijs``, ``Moskou``, ``Kaapstad``, ``Pékin``,
``Kairo``...), big cities that share a zone (``Beijing``, ``Mumbai``, ``San Francisco``), and countries with one
zone or one obvious capital (``Japan``, ``Japon``, ``Duitsland``, ``Frankreich``...). Zone names that are also
common words (``Easter``, ``Christmas``, ``West``, ``Davis``) are left out, so "What day is Easter?" is not a
question about Pacific/Easter. :func:`time_zone_in` gives ``"UTC"`` when nothing matched.
"""

from __future__ import annotations

import re
import unicodedata
import zoneinfo
from functools import lru_cache

__all__ = ["fold", "place_zone", "time_zone_in"]

_WORD = re.compile(r"[^\W\d_]+")
_ZONE_REGIONS = ("Africa/", "America/", "Asia/", "Atlantic/", "Australia/", "Europe/", "Indian/", "Pacific/")
# IANA city names that are ordinary words or surnames far more often than places in a question.
_COMMON_WORDS = frozenset({
    "easter", "christmas", "center", "davis", "palmer", "casey", "knox", "wake", "midway", "truk", "nome", "tell city",
    "marengo", "resolute", "reunion", "regina", "stanley", "johnston", "currie", "lindeman", "act", "north", "south",
    "west", "nsw", "lhi", "oral", "salta",
})  # fmt: skip

_TOKYO, _SHANGHAI, _LONDON, _PARIS, _BERLIN = "Asia/Tokyo", "Asia/Shanghai", "Europe/London", "Europe/Paris", \
    "Europe/Berlin"
_KOLKATA, _LA, _NY, _JOBURG = "Asia/Kolkata", "America/Los_Angeles", "America/New_York", "Africa/Johannesburg"
# Folded names (see fold) -> zone. Exonyms (nl, de, fr, es), cities without a zone of their own, countries.
_PLACES: dict[str, str] = {
    # Exonyms of cities
    "tokio": _TOKYO, "peking": _SHANGHAI, "pekin": _SHANGHAI, "beijing": _SHANGHAI, "sjanghai": _SHANGHAI,
    "londen": _LONDON, "londres": _LONDON, "parijs": _PARIS, "moskou": "Europe/Moscow", "moskau": "Europe/Moscow",
    "moscou": "Europe/Moscow", "kaapstad": _JOBURG, "kapstadt": _JOBURG, "cape town": _JOBURG, "le cap": _JOBURG,
    "berlijn": _BERLIN, "keulen": _BERLIN, "koln": _BERLIN, "cologne": _BERLIN, "munchen": _BERLIN,
    "munich": _BERLIN, "frankfurt": _BERLIN, "hamburg": _BERLIN, "brussel": "Europe/Brussels",
    "bruxelles": "Europe/Brussels", "antwerpen": "Europe/Brussels", "wenen": "Europe/Vienna", "wien": "Europe/Vienna",
    "lissabon": "Europe/Lisbon", "lisbonne": "Europe/Lisbon", "kopenhagen": "Europe/Copenhagen",
    "copenhague": "Europe/Copenhagen", "praag": "Europe/Prague", "prag": "Europe/Prague", "athene": "Europe/Athens",
    "athen": "Europe/Athens", "athenes": "Europe/Athens", "rom": "Europe/Rome", "milaan": "Europe/Rome",
    "mailand": "Europe/Rome", "milan": "Europe/Rome", "venetie": "Europe/Rome", "florence": "Europe/Rome",
    "napels": "Europe/Rome", "warschau": "Europe/Warsaw", "varsovie": "Europe/Warsaw", "boedapest": "Europe/Budapest",
    "genf": "Europe/Zurich", "geneve": "Europe/Zurich", "geneva": "Europe/Zurich", "bern": "Europe/Zurich",
    "barcelona": "Europe/Madrid", "sevilla": "Europe/Madrid", "edinburgh": _LONDON, "manchester": _LONDON,
    "den haag": "Europe/Amsterdam", "the hague": "Europe/Amsterdam", "rotterdam": "Europe/Amsterdam",
    "utrecht": "Europe/Amsterdam", "eindhoven": "Europe/Amsterdam", "kairo": "Africa/Cairo", "cairo": "Africa/Cairo",
    "le caire": "Africa/Cairo", "jeruzalem": "Asia/Jerusalem", "jerusalem": "Asia/Jerusalem",
    "tel aviv": "Asia/Jerusalem", "mumbai": _KOLKATA, "bombay": _KOLKATA, "delhi": _KOLKATA, "new delhi": _KOLKATA,
    "bangalore": _KOLKATA, "seoel": "Asia/Seoul", "singapur": "Asia/Singapore", "singapour": "Asia/Singapore",
    "hongkong": "Asia/Hong_Kong", "manilla": "Asia/Manila", "san francisco": _LA, "seattle": _LA, "san diego": _LA,
    "washington": _NY, "boston": _NY, "miami": _NY, "atlanta": _NY, "philadelphia": _NY, "montreal": "America/Toronto",
    "mexico stad": "America/Mexico_City", "mexiko stadt": "America/Mexico_City", "rio de janeiro": "America/Sao_Paulo",
    "sao paulo": "America/Sao_Paulo", "melbourne": "Australia/Melbourne", "canberra": "Australia/Sydney",
    "wellington": "Pacific/Auckland", "istanboel": "Europe/Istanbul",
    # Countries (one zone, or the capital's)
    "japan": _TOKYO, "japon": _TOKYO, "china": _SHANGHAI, "chine": _SHANGHAI, "nederland": "Europe/Amsterdam",
    "netherlands": "Europe/Amsterdam", "holland": "Europe/Amsterdam", "niederlande": "Europe/Amsterdam",
    "pays bas": "Europe/Amsterdam", "belgie": "Europe/Brussels", "belgium": "Europe/Brussels",
    "belgien": "Europe/Brussels", "belgique": "Europe/Brussels", "duitsland": _BERLIN, "germany": _BERLIN,
    "deutschland": _BERLIN, "allemagne": _BERLIN, "frankrijk": _PARIS, "france": _PARIS, "frankreich": _PARIS,
    "engeland": _LONDON, "england": _LONDON, "angleterre": _LONDON, "united kingdom": _LONDON,
    "verenigd koninkrijk": _LONDON, "grossbritannien": _LONDON, "royaume uni": _LONDON, "uk": _LONDON,
    "spanje": "Europe/Madrid", "spain": "Europe/Madrid", "spanien": "Europe/Madrid", "espagne": "Europe/Madrid",
    "italie": "Europe/Rome", "italy": "Europe/Rome", "italien": "Europe/Rome", "india": _KOLKATA, "indien": _KOLKATA,
    "inde": _KOLKATA, "korea": "Asia/Seoul", "zuid korea": "Asia/Seoul", "south korea": "Asia/Seoul",
    "sudkorea": "Asia/Seoul", "coree": "Asia/Seoul", "brazil": "America/Sao_Paulo", "brazilie": "America/Sao_Paulo",
    "brasilien": "America/Sao_Paulo", "bresil": "America/Sao_Paulo", "egypt": "Africa/Cairo",
    "egypte": "Africa/Cairo", "agypten": "Africa/Cairo", "south africa": _JOBURG, "zuid afrika": _JOBURG,
    "sudafrika": _JOBURG, "afrique du sud": _JOBURG, "switzerland": "Europe/Zurich", "zwitserland": "Europe/Zurich",
    "schweiz": "Europe/Zurich", "suisse": "Europe/Zurich", "austria": "Europe/Vienna", "oostenrijk": "Europe/Vienna",
    "osterreich": "Europe/Vienna", "autriche": "Europe/Vienna", "portugal": "Europe/Lisbon",
    "greece": "Europe/Athens", "griekenland": "Europe/Athens", "griechenland": "Europe/Athens",
    "grece": "Europe/Athens", "turkey": "Europe/Istanbul", "turkije": "Europe/Istanbul",
    "turkei": "Europe/Istanbul", "turquie": "Europe/Istanbul", "poland": "Europe/Warsaw", "polen": "Europe/Warsaw",
    "pologne": "Europe/Warsaw", "sweden": "Europe/Stockholm", "zweden": "Europe/Stockholm",
    "schweden": "Europe/Stockholm", "suede": "Europe/Stockholm", "norway": "Europe/Oslo", "noorwegen": "Europe/Oslo",
    "norwegen": "Europe/Oslo", "norvege": "Europe/Oslo", "denmark": "Europe/Copenhagen",
    "denemarken": "Europe/Copenhagen", "danemark": "Europe/Copenhagen", "finland": "Europe/Helsinki",
    "finnland": "Europe/Helsinki", "finlande": "Europe/Helsinki", "ireland": "Europe/Dublin",
    "ierland": "Europe/Dublin", "irland": "Europe/Dublin", "irlande": "Europe/Dublin", "thailand": "Asia/Bangkok",
    "thailande": "Asia/Bangkok", "indonesia": "Asia/Jakarta", "indonesie": "Asia/Jakarta",
    "indonesien": "Asia/Jakarta", "israel": "Asia/Jerusalem", "mexico": "America/Mexico_City",
    "mexique": "America/Mexico_City", "mexiko": "America/Mexico_City", "argentina": "America/Argentina/Buenos_Aires",
    "argentinie": "America/Argentina/Buenos_Aires", "argentinien": "America/Argentina/Buenos_Aires",
    "argentine": "America/Argentina/Buenos_Aires", "new zealand": "Pacific/Auckland",
    "nieuw zeeland": "Pacific/Auckland", "neuseeland": "Pacific/Auckland", "nouvelle zelande": "Pacific/Auckland",
    "iceland": "Atlantic/Reykjavik", "ijsland": "Atlantic/Reykjavik", "islande": "Atlantic/Reykjavik",
    "vietnam": "Asia/Ho_Chi_Minh", "philippines": "Asia/Manila",
    "filipijnen": "Asia/Manila", "russia": "Europe/Moscow", "rusland": "Europe/Moscow", "russland": "Europe/Moscow",
    "russie": "Europe/Moscow",
}  # fmt: skip


def fold(text: str) -> str:
    """Lower case without accents (``"Zürich"`` -> ``"zurich"``; ``ß`` -> ``ss``)."""
    decomposed = unicodedata.normalize("NFKD", text.lower().replace("ß", "ss"))
    return "".join(c for c in decomposed if not unicodedata.combining(c))


@lru_cache(maxsize=1)
def _places() -> dict[str, str]:
    """Folded place name -> zone: the IANA cities (shortest zone name first, so canonical zones win over legacy
    links) under the table above, which wins."""
    found: dict[str, str] = {}
    for zone in sorted(zoneinfo.available_timezones(), key=lambda z: (len(z), z)):
        if zone.startswith(_ZONE_REGIONS):
            name = fold(zone.rsplit("/", 1)[1].replace("_", " "))
            if name not in _COMMON_WORDS:
                found.setdefault(name, zone)
    available = zoneinfo.available_timezones()
    found.update((name, zone) for name, zone in _PLACES.items() if zone in available)
    return found


def place_zone(text: str) -> str | None:
    """The zone of the first place named in ``text`` (up to three words, longest first: "New York" before
    "York"), or None."""
    words = _WORD.findall(fold(text))
    names = _places()
    for size in (3, 2, 1):
        for i in range(len(words) - size + 1):
            zone = names.get(" ".join(words[i:i + size]))
            if zone is not None:
                return zone
    return None


def time_zone_in(text: str) -> str:
    """:func:`place_zone`, else ``"UTC"``."""
    return place_zone(text) or "UTC"
