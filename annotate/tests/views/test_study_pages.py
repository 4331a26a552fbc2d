import pytest


def test_it_lists_only_the_users_studies(client, bob, study, other_study):
    client.force_login(bob)
    html = client.get("/").content.decode()
    assert "Alpha study" in html
    assert "Charlie&#x27;s study" not in html and "Charlie's study" not in html


def test_the_overview_counts_documents_episodes_and_holdout(client, alice, study, make_episode):
    make_episode(study)
    make_episode(study, split="holdout")
    client.force_login(alice)
    response = client.get("/studies/alpha/")
    assert response.status_code == 200
    counts = response.context["counts"]
    assert (counts.documents, counts.episodes, counts.coded, counts.adjudicated, counts.holdout) == (2, 2, 0, 0, 1)


def test_a_non_member_gets_404(client, charlie, study):
    client.force_login(charlie)
    assert client.get("/studies/alpha/").status_code == 404
    assert client.get("/studies/alpha/members/").status_code == 404


def test_an_anonymous_user_is_sent_to_login(client, study):
    response = client.get("/studies/alpha/")
    assert response.status_code == 302
    assert response.url == "/login/?next=/studies/alpha/"


@pytest.mark.parametrize("persona", ["vera", "bob"])
def test_a_viewer_or_coder_cannot_manage_members(client, request, persona, study):
    client.force_login(request.getfixturevalue(persona))
    response = client.post("/studies/alpha/members/", {"who": persona, "role": "owner"})
    assert response.status_code == 403
    assert study.memberships.get(user__username=persona).role != "owner"


def test_the_owner_adds_a_member(client, alice, charlie, study):
    client.force_login(alice)
    response = client.post("/studies/alpha/members/", {"who": "charlie", "role": "viewer"})
    assert response.status_code == 302
    assert study.memberships.get(user=charlie).role == "viewer"


def test_it_rejects_an_existing_member_with_a_field_error(client, alice, study):
    client.force_login(alice)
    response = client.post("/studies/alpha/members/", {"who": "bob", "role": "owner"})
    assert response.status_code == 400
    assert "already a member" in response.content.decode()
    assert study.memberships.get(user__username="bob").role == "coder"


def test_the_last_owner_cannot_demote_themselves(client, alice, study):
    client.force_login(alice)
    own = study.memberships.get(user=alice)
    response = client.post(f"/studies/alpha/members/{own.pk}/", {"role": "viewer"}, follow=True)
    assert "at least one owner" in response.content.decode()
    assert study.memberships.get(user=alice).role == "owner"


def test_csrf_is_enforced_on_forms(alice, study):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    assert strict.post("/studies/alpha/members/", {"who": "charlie", "role": "owner"}).status_code == 403


def test_the_study_list_query_count_is_constant(client, alice, codebook, django_assert_max_num_queries):
    from annotate.studies.services import study_create

    for i in range(5):
        study_create(slug=f"s{i}", name=f"S{i}", codebook=codebook, owner=alice)
    client.force_login(alice)
    with django_assert_max_num_queries(3):
        client.get("/")
