"""The image filter refuses only questions that point at a picture; a picture, photo or painting that
is what the question is about passes. Sentences in the style of GSM8K word problems and HSSBench /
MMLU-Pro questions, written for this test."""

import pytest

from kame_data.records import SourceItem
from kame_data.sources import filters as F

# Pictures, photos, paintings, posters and maps as the subject of the question: kept.
SUBJECT = [
    "Malcolm posted his photo on Instagram and got 2000 likes on the photo in the first hour. "
    "How many likes did it get per minute?",
    "Mark is selling a painting for $400 and pays a 15% commission to the gallery. How much does he keep?",
    "An artist sells each painting for $120. How much does she earn for 7 paintings?",
    "Sam takes 3 photos every minute. How many photos does he take in an hour?",
    "A photographer charges $50 per photo shoot and does 4 photo shoots a day. How much does she make in 5 days?",
    "The museum bought the painting for $2 million and sold the painting ten years later for twice as much. "
    "What was the profit?",
    "Lisa frames a picture that is 8 inches wide. The frame adds 2 inches on each side. How wide is the framed "
    "picture?",
    "A school printed 300 posters. The posters cost $0.50 each. How much did the school spend?",
    "Which Dutch painter completed The Night Watch in 1642?",
    "Tom draws 5 pictures a day. How many pictures does he draw in a week?",
    "The photo album holds 24 photos per page. How many pages are needed for 120 photos?",
    "Why are Impressionist paintings known for their visible brush strokes?",
    "A map has a scale of 1 inch to 50 miles. Two cities are 3 inches apart on the map. How far apart are they?",
    "Ella colored the drawing with 6 crayons and gave the drawing to her mother. How many crayons are left of 10?",
    "Jenny's painting sold at auction for $900, three times what the painting cost her to make. What did it cost?",
    "Who painted the ceiling of the Sistine Chapel?",
]
# Questions that point at a picture they do not hold: rejected.
DEICTIC = [
    "What is the man in the picture holding?",
    "The picture below shows a village market. What season is it?",
    "As shown in the figure, what is the angle between the two roads?",
    "Which city is marked with a star on this map?",
    "What does this painting tell us about life in the countryside?",
    "Look at the photo. What is the woman selling?",
    "In the image above, which country is shaded in red?",
    "The chart below shows the sales of a company over five years. In which year were sales highest?",
    "According to the graph, what happened to unemployment after 2008?",
    "Why did the painter leave the background unfinished?",
    "The painter's use of light in this work suggests what?",
    "Based on the map, which river flows north?",
    "What is depicted in the following photograph?",
    "Refer to the diagram: which gear turns fastest?",
    "The accompanying photo shows a protest. What were the marchers demanding?",
    "What does the cartoonist suggest about the new tariff?",
]


def _item(question: str, options=()) -> SourceItem:
    return SourceItem(id="t-1", source="t", category="c", question=question, options=list(options),
                      answer=options[0] if options else "1", answer_letter="A" if options else "")


@pytest.mark.parametrize("question", SUBJECT)
def test_pictures_as_subjects_are_kept(question):
    assert F.needs_image(_item(question), F.FilterConfig()) is None


@pytest.mark.parametrize("question", DEICTIC)
def test_pointing_at_a_picture_is_rejected(question):
    flag = F.needs_image(_item(question), F.FilterConfig())
    assert flag is not None and flag.reason == "needs_image" and flag.detail.startswith("refers to ")


def test_enough_cases_of_each_kind():
    assert len(SUBJECT) >= 10 and len(DEICTIC) >= 10


def test_a_named_artist_is_not_an_unseen_work():
    cfg = F.FilterConfig()
    assert F.needs_image(_item("Why did the painter Rembrandt use so much shadow?"), cfg) is None
    assert F.needs_image(_item("A painter charges $30 an hour. The painter works 6 hours. What is the bill?"),
                         cfg) is None
    assert F.needs_image(_item("Why did the painter leave the background unfinished?"), cfg).detail == \
        "refers to 'the painter'"


def test_options_that_start_with_a_keyword_are_words_not_code():
    cfg = F.FilterConfig()
    words = _item("The main purpose of the Meiji land tax reform was to (   ).",
                  ["return farmland to the samurai", "give the government a steady income", "end the civil war",
                   "import foreign rice", "class the peasants as soldiers"])
    assert F.code(words, cfg) is None and F.check(words, cfg) is None
    assert F.code(_item("What does f return?\ndef f(x):\n    return x + 1"), cfg).reason == "code"
    assert F.code(_item("What is printed?\nimport math\nprint(math.floor(2.5))"), cfg).reason == "code"
    assert F.code(_item("What does main return?\nint main() {\n  return 0;\n}"), cfg).reason == "code"
