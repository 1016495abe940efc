"""A worked GSM8K step said as its result: real steps from tests/data/sources/gsm8k_test_200.jsonl
(annotations stripped, as the source loader does), including quantities with a qualifier
('5 cars that exited', '50 pieces of straw for hamsters'), which must still be said as a result,
not as the sum read aloud."""

import pytest

from kame_data.script.solution import collapse, lead

CASES = [
    ("The cars that exited do not need to be included so there were 30 original cars – 5 cars that exited = 25 cars "
     "that drove through the traffic jam.",
     "The cars that exited do not need to be included so there were 25 cars that drove through the traffic jam."),
    ("Between the rabbits and the hamsters, there are 50 pieces of straw for hamsters + 20 pieces of straw for rabbits "
     "= 70 pieces of straw.", "Between the rabbits and the hamsters, there are 70 pieces of straw."),
    ("Jordan plays video games for 2 hours every day x 7 days in a week = 14 hours a week.",
     "Jordan plays video games for 14 hours a week."),
    ("Each school has sent 1 girls’ basketball team + 1 boys’ basketball team = 2 teams.",
     "Each school has sent 2 teams."),
    ("If Jordan spent his 14 hours working instead, he would make 14 hours x $10 = $140.",
     "If Jordan spent his 14 hours working instead, he would make $140."),
    ("This means there are 1000 – 250 = 750 pieces remaining.", "This means there are 750 pieces remaining."),
    # a list before a sum keeps its own numbers: only the calculation goes
    ("He gave 3 to the boy and 4 x 2 = 8 to the girl.", "He gave 3 to the boy and 8 to the girl."),
    # algebra is reasoning, not arithmetic
    ("The team played L + 8 + L = 22 games.", "The team played L + 8 + L = 22 games."),
]


@pytest.mark.parametrize("step,said", CASES)
def test_a_calculation_is_said_as_its_result(step, said):
    assert collapse(step) == said


def test_lead_takes_whole_sentences_from_the_start():
    explanation = ("In the hamster cages, there are 10 cages * 5 pieces of straw per hamster cage = 50 pieces of straw. "
                   "Between the rabbits and the hamsters, there are 50 pieces of straw for hamsters + 20 pieces of "
                   "straw for rabbits = 70 pieces of straw. As the remaining straw is for the rats, the rats have a "
                   "total of 160 used pieces of straw – 70 pieces of straw for the hamsters and rabbits = 90 pieces of "
                   "straws.")
    kept, whole = lead(explanation, 25)
    assert kept[:2] == ["In the hamster cages, there are 50 pieces of straw.",
                        "Between the rabbits and the hamsters, there are 70 pieces of straw."]
    assert not whole and all("=" not in s for s in kept)
