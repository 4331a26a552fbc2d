from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model

from annotate.models import QueueOrder, Role


class MemberForm(forms.Form):
    username = forms.CharField(max_length=150, label="Username")
    role = forms.ChoiceField(choices=Role.choices, label="Role")
    adjudicator = forms.BooleanField(required=False, label="May adjudicate (coders)")

    def clean_username(self):
        username = self.cleaned_data["username"].strip()
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise forms.ValidationError(f"There is no user '{username}'.")
        self.cleaned_data["user"] = user
        return username


class StudyStartForm(forms.Form):
    name = forms.CharField(max_length=200)
    slug = forms.SlugField(max_length=60, help_text="Letters, digits, - and _; it goes in the study's URLs.")
    codebook = forms.ModelChoiceField(
        queryset=None, required=False, empty_label="— upload a codebook instead —", label="Published codebook"
    )
    codebook_file = forms.FileField(
        required=False, label="…or upload a codebook JSON", help_text="The format of fixtures/codebook-v1.json."
    )
    coders_per_episode = forms.IntegerField(min_value=1, max_value=10, initial=2)
    blind = forms.BooleanField(required=False, initial=True, label="Blind coding")
    queue_order = forms.ChoiceField(choices=QueueOrder.choices, initial=QueueOrder.RANDOM)

    def __init__(self, *args, **kwargs):
        from taxonomy.models import Codebook

        super().__init__(*args, **kwargs)
        self.fields["codebook"].queryset = Codebook.objects.filter(published_at__isnull=False, private=False).order_by(
            "name", "-published_at"
        )

    def clean(self):
        data = super().clean()
        if not data.get("codebook") and not data.get("codebook_file"):
            self.add_error("codebook", "Choose a published codebook or upload one.")
        elif data.get("codebook") and data.get("codebook_file"):
            self.add_error("codebook_file", "Choose a published codebook or upload one, not both.")
        return data


class InviteForm(forms.Form):
    who = forms.CharField(max_length=254, label="Username or email")
    role = forms.ChoiceField(choices=Role.choices, initial=Role.CODER, required=False, help_text="Coder unless chosen.")
    adjudicator = forms.BooleanField(required=False, label="Adjudicator duty (coders)")

    def clean_role(self):
        return self.cleaned_data.get("role") or Role.CODER


class MemberUpdateForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)
    adjudicator = forms.BooleanField(required=False)


class InvitationAcceptForm(forms.Form):
    username = forms.CharField(max_length=150, help_text="Letters, digits and @/./+/-/_ only.")
    password1 = forms.CharField(label="Password", widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}))
    password2 = forms.CharField(
        label="Password again", widget=forms.PasswordInput(attrs={"autocomplete": "new-password"})
    )

    def clean_username(self):
        from django.contrib.auth.validators import UnicodeUsernameValidator

        username = self.cleaned_data["username"].strip()
        UnicodeUsernameValidator()(username)
        if get_user_model().objects.filter(username__iexact=username).exists():
            raise forms.ValidationError("That username is taken; choose another, or log in if it is yours.")
        return username

    def clean(self):
        from django.contrib.auth.password_validation import validate_password

        data = super().clean()
        if data.get("password1") and data.get("password1") != data.get("password2"):
            self.add_error("password2", "The two passwords differ.")
        elif data.get("password1"):
            try:
                validate_password(data["password1"], get_user_model()(username=data.get("username", "")))
            except forms.ValidationError as exc:
                self.add_error("password1", exc)
        return data
