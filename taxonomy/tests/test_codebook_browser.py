import pytest


@pytest.fixture
def logged_in(client, alice):
    client.force_login(alice)
    return client


def test_it_shows_every_type_by_category(logged_in, codebook):
    response = logged_in.get(f"/codebooks/{codebook.pk}/")
    html = response.content.decode()
    assert response.status_code == 200
    assert html.count('class="type card"') == 65
    assert html.count('class="category"') == 12
    assert "Underspecified or ambiguous request" in html
    assert "Indicators and example" in html


def test_it_searches_as_you_type_with_an_htmx_fragment(logged_in, codebook):
    response = logged_in.get(f"/codebooks/{codebook.pk}/", {"q": "prompt injection"}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html  # a fragment, not the page
    assert "SPC-06" in html
    assert html.count('class="type card"') < 65


def test_it_filters_by_axis_value(logged_in, codebook):
    response = logged_in.get(f"/codebooks/{codebook.pk}/", {"source": "user_spec"}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    types = [t for t in codebook.failure_types.all() if t.typical_source == "user_spec"]
    assert html.count('class="type card"') == len(types) > 0
    response = logged_in.get(f"/codebooks/{codebook.pk}/", {"stage": "setup", "capability": "actuation"})
    html = response.content.decode()
    expected = [
        t for t in codebook.failure_types.all()
        if "setup" in t.typical_stages and "actuation" in t.typical_capabilities
    ]  # fmt: skip
    assert html.count('class="type card"') == len(expected)


def test_it_pins_the_query_count(logged_in, codebook, django_assert_max_num_queries):
    # session + user, codebook, types with categories, axis values, categories
    with django_assert_max_num_queries(7):
        logged_in.get(f"/codebooks/{codebook.pk}/")
    with django_assert_max_num_queries(5):
        logged_in.get(f"/codebooks/{codebook.pk}/", {"q": "tool"}, HTTP_HX_REQUEST="true")


def test_each_type_has_its_own_page(logged_in, codebook):
    response = logged_in.get(f"/codebooks/{codebook.pk}/types/SPC-06/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "Instruction hijack from untrusted content" in html
    assert "R12" in html  # the decision rule that names it
    assert logged_in.get(f"/codebooks/{codebook.pk}/types/NOPE-1/").status_code == 404


def test_it_needs_a_login(client, codebook):
    response = client.get(f"/codebooks/{codebook.pk}/")
    assert response.status_code == 302
    assert response.url.startswith("/login/")
