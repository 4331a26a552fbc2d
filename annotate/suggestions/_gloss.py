"""The lexicon through which the local suggester reads reports not in English (pure).

Split from annotate.suggestions._text: the glossary of failure words in Spanish, French, German and
Portuguese, and the readings of Chinese and Japanese lexicon words (annotate.suggestions._lang).
"""

from __future__ import annotations

import re
import unicodedata

from annotate.suggestions._lang import CJK_CHAR as _CJK_CHAR
from annotate.suggestions._lang import cjk_readings

# Words of agent-failure reports in Spanish, French, German and Portuguese, mapped to the English
# the codebook is written in. Character n-grams catch cognates ("iteraciones", "timeout"); these
# catch the everyday words that are not cognates ("herramienta" = tool, "bucle" = loop). Keys are
# compared without accents and in lower case; a key ending in "*" is a stem and matches every word
# that starts with it (conjugations and plurals), a key without one the whole word only. The
# English readings are added next to the words, never instead of them, and only to text that is
# not English (see `reads_as_english`), so an English report reads exactly as it is written.
_GLOSSARY_ROWS = """
tool: herramient* ferrament* outil* werkzeug*
call: llamad* llamand* llamar llama llaman llamo chamad* chamand* chamar chama
call: appel* appelle* appeler aufruf* aufgerufen ruft
calling: llamando chamando appelant
identical: misma mismo mismas mismos mesma mesmo mesmas mesmos meme memes gleiche* dieselbe* denselben dasselbe
identical: identic* identiq* identisch*
again: novamente erneut encore
keeps: sigue siguen continua continuam
loop: bucle* boucle* schleife* laco lacos
repeated: repit* repet* wiederhol*
never: nunca jamas jamais niemals nie
answer: respond* respuesta* resposta* reponse* repond* antwort* beantwort*
stops: detien* detuv* arrete* arreter parou anhalt* stoppt
limit: limite* grenze* limits
cap: tope
iterations: iteracion* iteraco* iteration* iterationen
steps: pasos passos etapes schritte
step: paso passo etape schritt
turns: turnos tours runden
error: fallo erro erreur* fehler*
fails: falla fallan falha falham echoue* schlagt scheitert
failed: fallo fallaron falhou echoue fehlgeschlagen
run: ejecucion* execucao execution* ausfuhrung* lauf
task: tarea* tarefa* tache* aufgabe*
wait: espera esperar esperando aguard* attend attendre attente warte* wartet
indefinitely: indefinidamente indefiniment endlos unbegrenzt
hangs: cuelg* trava* hangt haengt
blocks: bloque* blockier*
progress: avance avanza progreso progres fortschritt*
killed: matar mata matamos matarla tuer tue abgebrochen
retry: reintent* reessa* tentar wiederhol
retries: reintentos tentativas essais
lost: pierd* perdid* perdu* perde* verlor*
missing: falta faltan faltaba manque* manquant* fehlt fehlen fehlend*
empty: vacio vacia vazio vazia vide
results: resultados resultats ergebnisse
result: resultado resultat ergebnis
search: busqueda* busca buscar recherche* suche suchen gesucht
query: consulta consultas abfrage
provider: proveedor* provedor* fournisseur* anbieter*
request: solicitud peticion requisicao requete anfrage
requests: solicitudes peticiones requisicoes requetes anfragen
too many: demasiadas demasiados trop zuviele
model: modelo* modele* modell*
output: salida* saida* sortie* ausgabe*
valid: valido valida gultig gueltig
invalid: invalido invalida ungultig ungueltig
parser: analizador analisador analyseur
user: usuario* utilisateur* nutzer* benutzer*
customer: cliente clientes kunde* kunden
memory: memoria memoire speicher
context: contexto contexte kontext*
window: ventana janela fenetre fenster
file: archivo fichier datei arquivo
files: archivos fichiers dateien arquivos
directory: directorio repertoire verzeichnis diretorio
instructions: instruccion* instruco* instrucoes anweisung*
rule: regla* regle* regra* regel*
constraint: restriccion* restricao contrainte* einschrankung*
ignores: ignora ignore ignoriert
wrong: incorrect* erroneo* errone* equivocad* errado errada mauvais falsch*
stuck: atascad* bloqueado preso
permission: permiso* permissao permissoes berechtigung*
denied: denegad* negado refuse verweigert
rejected: rechaz* rejet* rejeit* abgelehnt
agent: agente agentes agenten
plan: planificador planejador planificateur planung
expected: esperado esperada attendu erwartet
found: encontrad* trouve* gefunden
unknown: desconocid* inconnu* unbekannt* desconhecid*
exists: existe existen existiert
invented: inventad* invente* inventa erfund*
arguments: argumento* argumente
parameters: parametro* parametre* parameter
expired: caduc* expir* abgelaufen
refresh: renueva renovar renova rafraich* erneuer*
session: sesion sessao sitzung
authentication: autentica* authentifi*
history: historial historico historique verlauf
summary: resumen resume resumo resumid* resumido zusammenfass*
summarised: resumido resumida resume zusammengefasst
truncated: recortad* tronque* truncad* gekurzt
forgets: olvid* oubli* esquec* vergess*
state: estado etat zustand
saved: guardad* guarda sauvegard* enregistr* salvo salva gespeichert speichert
restart: reinici* redemarr* neustart* neu gestartet
resume: reanud* reprend* retom* fortsetz* fortgesetzt
approval: aprobacion aprovacao approbation freigabe genehmigung*
confirmation: confirmacion confirmacao bestatigung*
asking: preguntar pregunto demande perguntar gefragt
deleted: borr* elimin* supprim* losch* apag*
destructive: destructiv* destrutiv* destructeur* destrukti*
undo: deshacer desfazer annuler ruckgangig
sent: envio enviado enviada enviou envoye* verschickt gesendet
email: correo courriel
finished: terminad* termino termine terminou fertig abgeschlossen
complete: completad* complete completo
continue: continuar continuer fortfahren weitermachen
pass: pasan passent passam bestehen bestanden
verification: verificacion verificacao verification uberprufung*
claims: afirma afirman affirme behauptet
goal: objetivo* objectif* ziel*
handoff: traspaso* transfiere uebergabe ubergabe* ubergibt
returns: devuelve devuelven renvoie retourne retorna liefert
server: servidor* serveur*
unavailable: indisponible nichtverfugbar
available: disponible* disponive* verfugbar
connection: conexion conexao connexion verbindung
quota: cuota cota kontingent
key: clave chave cle schlussel
environment: entorno environnement ambiente umgebung*
configuration: configuracion configuracao konfiguration
install: instalar instala installer installiert
version: version versao
exceeded: excedid* supera* superad* depasse* uberschritten excede*
large: grande grandes gros grosse
"""
GLOSSARY: dict[str, str] = {}
_GLOSS_STEMS: dict[str, str] = {}
for _english, _words in (row.split(":", 1) for row in _GLOSSARY_ROWS.strip().splitlines()):
    for _word in _words.split():
        if _word.endswith("*"):
            _GLOSS_STEMS.setdefault(_word[:-1], _english)
        else:
            GLOSSARY.setdefault(_word, _english)
_STEM_LENGTHS = sorted({len(s) for s in _GLOSS_STEMS}, reverse=True)
_GLOSS_WORD = re.compile(r"\b\w+\b", re.U)


def fold(text: str) -> str:
    """Lower case without accents: "límite" and "limite" read the same."""
    return "".join(ch for ch in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(ch))


def _english_reading(word: str) -> str | None:
    w = fold(word)
    if w in GLOSSARY:
        return GLOSSARY[w]
    for n in _STEM_LENGTHS:
        if len(w) >= n and w[:n] in _GLOSS_STEMS:
            return _GLOSS_STEMS[w[:n]]
    return None


def gloss(text: str) -> str:
    """The text with its non-English words followed by their English reading (for scoring only)."""

    def read(m: re.Match) -> str:
        english = _english_reading(m.group(0))
        return f"{m.group(0)} {english}" if english else m.group(0)

    out, at = [], 0
    for _start, end, english in cjk_readings(text):  # Chinese and Japanese: readings after lexicon words
        out += [text[at:end], f" {english} "]
        at = end
    return _GLOSS_WORD.sub(read, "".join(out) + text[at:])


def english_rendering(text: str, known: frozenset[str]) -> str:
    """Only the English of a text in another language: each glossed word as its English reading, words the
    codebook uses as they are (identifiers, cognates, English log text), the rest left out.

    Read in the codebook's word space this forms English phrases ("repite la misma llamada" reads
    "repeated call"), which the glossed text, with the original words in between, does not.
    """
    found = [(start, english) for start, _, english in cjk_readings(text)]
    for m in _GLOSS_WORD.finditer(text):
        word = m.group(0)
        if _CJK_CHAR.search(word):
            continue  # read through the lexicon above
        english = _english_reading(word)
        if english:
            found.append((m.start(), english))
        elif word.lower() in known:
            found.append((m.start(), word))
    return " ".join(word for _, word in sorted(found))
